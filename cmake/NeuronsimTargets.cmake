# Warnings and options shared by every neuronsim target.
add_library(neuronsim_options INTERFACE)
target_compile_options(neuronsim_options INTERFACE -Wall -Wextra -Wno-unused-parameter
                                                   # Bit-exact numerics: no fused multiply-add.
                                                   -ffp-contract=off)
if(NEURONSIM_SANITIZE)
  target_compile_options(neuronsim_options INTERFACE -fsanitize=address,undefined
                                                     -fno-omit-frame-pointer)
  target_link_options(neuronsim_options INTERFACE -fsanitize=address,undefined)
endif()
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  message(STATUS "No build type given; neuronsim's scripts pass -DCMAKE_BUILD_TYPE=Release")
endif()

# neuronsim_add_library(name SOURCES ... DEPS ...): a library with include/ as its public headers.
function(neuronsim_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  add_library(neuronsim::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE neuronsim_options ${ARG_PRIVATE_DEPS})
endfunction()
