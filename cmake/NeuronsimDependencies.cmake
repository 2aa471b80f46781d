# All third-party dependencies come from Debian 12 packages (see tools/setup.sh).
find_package(PkgConfig REQUIRED)
pkg_check_modules(SYSTEMC REQUIRED IMPORTED_TARGET systemc>=2.3.4)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)
if(NEURONSIM_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()
if(NEURONSIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(NEURONSIM_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# SystemC as one interface target carrying the defines every including TU needs.
add_library(neuronsim_systemc INTERFACE)
target_link_libraries(neuronsim_systemc INTERFACE PkgConfig::SYSTEMC)
target_compile_definitions(neuronsim_systemc INTERFACE SC_CPLUSPLUS=201703L
                                                       SC_INCLUDE_DYNAMIC_PROCESSES)
