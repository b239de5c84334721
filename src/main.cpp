#include "cli/cli.hpp"

int main(int argc, char** argv) { return sb::cli::main(argc, argv); }
