// The fuzz tests share the MPI tests' main (rank-ordered reports, agreed exit code).
#include "mpi/main.cpp"
