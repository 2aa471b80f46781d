// Placeholder: filled in by the test suite for this component.
#include <gtest/gtest.h>
