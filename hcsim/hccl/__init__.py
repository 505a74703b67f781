"""HCCL's own knobs and behaviour: HCCL_ALGO strings, default algorithm selection, and the
execution details (CCL buffer loops, op expansion modes) that change the answer."""
