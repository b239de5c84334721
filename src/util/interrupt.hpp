// Ctrl-C without debris: the first SIGINT/SIGTERM sets a flag that long loops
// poll through check_interrupted(), which throws, so destructors remove the
// temporary files of the work in progress. A second signal ends the process at once.
#pragma once

namespace sb {

void install_interrupt_handlers();
bool interrupted();
const char* interruption();  // "interrupted" (SIGINT), "terminated" (SIGTERM), else nullptr
void check_interrupted();  // throws sb::Error (exit 130) once a signal came

}  // namespace sb
