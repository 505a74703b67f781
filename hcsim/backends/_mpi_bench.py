"""Run under mpirun: time one MPI call over sizes; rank 0 prints CSV rows (size,time_us).

Each size: one warm-up, then ``iters`` runs each after a barrier; a run's time is the
slowest rank's, and the row is the median run (robust to a descheduled rank on a
machine with fewer cores than ranks)."""

import sys
import time

import numpy as np
from mpi4py import MPI


def make_op(comm, collective: str, size: int):
    """The call that moves ``size`` bytes in nccl-tests' convention, with its buffers bound."""
    p = comm.size
    per_rank = max(size // p, 1)
    whole = max(size, 1)
    if collective == "allreduce":
        send, recv = np.ones(whole, np.uint8), np.empty(whole, np.uint8)
        return lambda: comm.Allreduce(send, recv, op=MPI.SUM)
    if collective == "allgather":
        send, recv = np.ones(per_rank, np.uint8), np.empty(per_rank * p, np.uint8)
        return lambda: comm.Allgather(send, recv)
    if collective == "reduce_scatter_block":
        send, recv = np.ones(per_rank * p, np.uint8), np.empty(per_rank, np.uint8)
        return lambda: comm.Reduce_scatter_block(send, recv, op=MPI.SUM)
    if collective == "reduce_scatter":  # the vector form: coll_tuned's ring lives here
        send, recv = np.ones(per_rank * p, np.uint8), np.empty(per_rank, np.uint8)
        return lambda: comm.Reduce_scatter(send, recv, [per_rank] * p, op=MPI.SUM)
    if collective == "alltoall":
        send, recv = np.ones(per_rank * p, np.uint8), np.empty(per_rank * p, np.uint8)
        return lambda: comm.Alltoall(send, recv)
    if collective == "bcast":
        buf = np.ones(whole, np.uint8)
        return lambda: comm.Bcast(buf, root=0)
    # point-to-point probes for calibration (hcsim.backends.mpi.PROBES)
    if collective == "p2p_fanout":  # rank 0 sends to every other rank at once
        send, recv = np.ones(whole, np.uint8), np.empty(whole, np.uint8)

        def fanout():
            if comm.rank == 0:
                MPI.Request.Waitall([comm.Isend(send, dest=d) for d in range(1, p)])
            else:
                comm.Recv(recv, source=0)

        return fanout
    if collective == "p2p_all":  # every rank sends n bytes to every other at once, p - 1 times
        send, recv = np.ones(whole, np.uint8), np.empty((p, whole), np.uint8)
        r = comm.rank
        peers = [q for q in range(p) if q != r]

        def all_peers():
            for _ in range(p - 1):
                reqs = [comm.Irecv(recv[q], source=q) for q in peers]
                reqs += [comm.Isend(send, dest=q) for q in peers]
                MPI.Request.Waitall(reqs)

        return all_peers
    if collective == "reduce_local":  # every rank reduces n bytes into n bytes, p - 1 times
        send, acc = np.ones(whole, np.uint8), np.zeros(whole, np.uint8)

        def reduce_local():
            for _ in range(p - 1):
                MPI.SUM.Reduce_local(send, acc)

        return reduce_local
    if collective in ("p2p_oneway", "p2p_exchange", "p2p_shift", "p2p_rotate", "p2p_cross"):
        send, recv = np.ones(whole, np.uint8), np.empty(whole, np.uint8)
        r = comm.rank

        def probe():
            if collective == "p2p_oneway":
                if r == 0:
                    comm.Send(send, dest=1)
                elif r == 1:
                    comm.Recv(recv, source=0)
            elif collective == "p2p_exchange":  # pairs (2i, 2i+1) at once, p - 1 times back to back
                if r ^ 1 < p:
                    for _ in range(p - 1):
                        comm.Sendrecv(send, dest=r ^ 1, recvbuf=recv, source=r ^ 1)
            elif collective == "p2p_cross":  # the first half sends to the second at once, p - 1 times
                half = p // 2
                for _ in range(p - 1):
                    if r < half:
                        comm.Send(send, dest=r + half)
                    elif r < 2 * half:
                        comm.Recv(recv, source=r - half)
            elif collective == "p2p_shift":  # every rank to the next at once, p - 1 times back to back
                for _ in range(p - 1):
                    comm.Sendrecv(send, dest=(r + 1) % p, recvbuf=recv, source=(r - 1) % p)
            else:  # as the shift, but step k goes to the k-th next rank: a new peer every step
                for k in range(1, p):
                    comm.Sendrecv(send, dest=(r + k) % p, recvbuf=recv, source=(r - k) % p)

        return probe
    raise SystemExit(f"collective {collective!r} not supported by the MPI bench")


def main():
    collective, sizes, iters = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
    comm = MPI.COMM_WORLD
    for size in sizes:
        op = make_op(comm, collective, size)
        op()  # warm-up
        mine = np.empty(iters)
        for k in range(iters):
            comm.Barrier()
            t0 = time.perf_counter()
            op()
            mine[k] = time.perf_counter() - t0
        slowest = np.empty(iters) if comm.rank == 0 else None
        comm.Reduce(mine, slowest, op=MPI.MAX, root=0)
        if comm.rank == 0:
            print(f"{size},{float(np.median(slowest)) * 1e6:.3f}", flush=True)


if __name__ == "__main__":
    main()
