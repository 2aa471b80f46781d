#include "neuronsim/sim/trace_sink.h"

namespace neuronsim::sim {

TraceSink& null_trace_sink() {
  static NullTraceSink sink;
  return sink;
}

}  // namespace neuronsim::sim
