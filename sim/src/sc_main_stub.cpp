// neuronsim drives SystemC from its own entry points (sc_start from main, tests, the Python
// extension) and never through sc_elab_and_sim; libsystemc.so still needs the symbol to load.
#include <systemc>

int sc_main(int, char*[]) {
  return 0;
}
