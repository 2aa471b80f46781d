# The wheel (scikit-build-core configures the project with SKBUILD set; pyproject.toml): the
# extension, its build record, the ncsim binary and its launcher, plus every shared library they
# link that a user's system may not have (cmake/BundleSharedLibs.cmake), carried inside the package
# as an auditwheel-repaired wheel carries them and found through RUNPATH relative to $ORIGIN.
if(NOT NEURONSIM_BUILD_BACKEND OR NOT NEURONSIM_BUILD_TOOLS)
  message(FATAL_ERROR "the wheel needs NEURONSIM_BUILD_BACKEND=ON and NEURONSIM_BUILD_TOOLS=ON")
endif()
# torch/lib beside the package holds libtorch: it is loaded by `import torch` first anyway, the
# RUNPATH only lets `ldd` and a bare dlopen resolve it too.
set_target_properties(neuronsim_C PROPERTIES INSTALL_RPATH "$ORIGIN/_libs;$ORIGIN/../torch/lib")
set_target_properties(ncsim PROPERTIES INSTALL_RPATH "$ORIGIN/../_libs")
install(TARGETS neuronsim_C LIBRARY DESTINATION neuronsim)
install(FILES ${PROJECT_BINARY_DIR}/backend/_build_info.py DESTINATION neuronsim)
# The NKI import names (python/_neuronsim_names): a .pth at the top of site-packages.
install(FILES python/neuronsim-nki-names.pth DESTINATION .)
install(TARGETS ncsim RUNTIME DESTINATION neuronsim/bin)
install(PROGRAMS tools/ncsim/wheel_launcher.py DESTINATION ${SKBUILD_SCRIPTS_DIR} RENAME ncsim)
install(CODE "set(NEURONSIM_BUNDLE_MODULES \"$<TARGET_FILE:neuronsim_C>\")
set(NEURONSIM_BUNDLE_EXECUTABLES \"$<TARGET_FILE:ncsim>\")
set(NEURONSIM_BUNDLE_DIR neuronsim/_libs)")
install(SCRIPT cmake/BundleSharedLibs.cmake)
