/* One MPI_Allreduce under SimGrid SMPI, timed in simulated time (benchmarks/bench_vs_smpi.py).
 *
 * Usage: smpirun ... ./allreduce BYTES
 * BYTES is the per-rank buffer (a multiple of sizeof(float)); the algorithm is chosen by
 * smpirun's --cfg=smpi/allreduce:<name>. Every rank reads MPI_Wtime right before and right
 * after the call (run with --cfg=smpi/wtime:0 so reading the clock costs no simulated time);
 * rank 0 prints the earliest start and the latest end:
 *     hcsim-bench-smpi start_s=<t0> end_s=<t1>
 * The buffers come from SMPI_SHARED_MALLOC: the values are meaningless, and SMPI neither keeps
 * p private copies nor copies the payload, which only makes SMPI's own run faster; the
 * simulated time does not depend on the values. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) {
    if (rank == 0)
      fprintf(stderr, "usage: %s BYTES\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long bytes = atol(argv[1]);
  if (bytes <= 0 || bytes % (long)sizeof(float) != 0) {
    if (rank == 0)
      fprintf(stderr, "BYTES must be a positive multiple of %zu\n", sizeof(float));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int count = (int)(bytes / (long)sizeof(float));
  float *send = SMPI_SHARED_MALLOC(bytes);
  float *recv = SMPI_SHARED_MALLOC(bytes);

  double t0 = MPI_Wtime();
  MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t1 = MPI_Wtime();

  double start, end;
  MPI_Reduce(&t0, &start, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&t1, &end, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("hcsim-bench-smpi start_s=%.17g end_s=%.17g\n", start, end);

  SMPI_SHARED_FREE(send);
  SMPI_SHARED_FREE(recv);
  MPI_Finalize();
  return 0;
}
