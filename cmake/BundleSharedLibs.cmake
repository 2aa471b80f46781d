# Install-time script (cmake/NeuronsimWheel.cmake): copies into NEURONSIM_BUNDLE_DIR every shared
# library that NEURONSIM_BUNDLE_MODULES and NEURONSIM_BUNDLE_EXECUTABLES need, directly or not,
# except those every Linux system provides (the manylinux policy's libc, libm, libstdc++, ...) and
# torch's own (found in torch/lib through the build RUNPATH; the user's torch provides them).
# Each is stored under the name the binaries ask for (its DT_NEEDED soname).
file(GET_RUNTIME_DEPENDENCIES
  MODULES ${NEURONSIM_BUNDLE_MODULES}
  EXECUTABLES ${NEURONSIM_BUNDLE_EXECUTABLES}
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  PRE_EXCLUDE_REGEXES
    "^ld-linux" "^linux-vdso"
    "^lib(c|m|dl|rt|pthread|util|resolv|nsl|crypt)\\.so"
    "^libgcc_s\\.so" "^libstdc\\+\\+\\.so"
  POST_EXCLUDE_REGEXES ".*/torch/lib/[^/]*$")
if(_unresolved)
  message(FATAL_ERROR "neuronsim wheel: shared libraries not found to bundle: ${_unresolved}")
endif()
set(_dest "${CMAKE_INSTALL_PREFIX}/${NEURONSIM_BUNDLE_DIR}")
foreach(_lib IN LISTS _resolved)
  get_filename_component(_soname "${_lib}" NAME)
  file(REAL_PATH "${_lib}" _file)
  message(STATUS "Bundling ${_lib} (${_file}) as ${NEURONSIM_BUNDLE_DIR}/${_soname}")
  file(INSTALL "${_file}" DESTINATION "${_dest}" RENAME "${_soname}")
endforeach()
