# Finds the torch installed in Python3_EXECUTABLE's environment (the user's venv: extensions build
# against the torch they will run with) and sets NEURONSIM_TORCH_PREFIX (its CMake prefix) and
# NEURONSIM_TORCH_VERSION (torch.__version__, recorded in the package and checked on import).
# `pip install .` without --no-build-isolation runs this interpreter with the venv's packages
# hidden; `-I` (isolated mode: no PYTHONPATH) sees them again, so both ways find the same torch.
set(_probe "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__)")
foreach(_flags IN ITEMS "-c" "-I;-c")
  execute_process(COMMAND ${Python3_EXECUTABLE} ${_flags} "${_probe}"
                  OUTPUT_VARIABLE _torch_out ERROR_QUIET RESULT_VARIABLE _torch_rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_torch_rc EQUAL 0)
    break()
  endif()
endforeach()
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "neuronsim: no torch in ${Python3_EXECUTABLE}'s environment. The extension "
                      "builds against the installed torch: `pip install torch==2.13.0` first, then "
                      "`pip install --no-build-isolation .`")
endif()
string(REPLACE "\n" ";" _torch_out "${_torch_out}")
list(GET _torch_out 0 NEURONSIM_TORCH_PREFIX)
list(GET _torch_out 1 NEURONSIM_TORCH_VERSION)
