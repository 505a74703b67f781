import pytest

from hcsim.errors import ConfigError
from hcsim.hccl.algo_env import parse_hccl_algo


@pytest.mark.parametrize("text,op,level1", [
    ("level0:NA;level1:H-D_R", "allreduce", "H-D_R"),
    ("level0:NA;level1:ring", "broadcast", "ring"),
    ("level0:NA;level1:NHR;level2:ring", "allgather", "NHR"),
    (" level0 : NA ; level1 : NB ", "reducescatter", "NB"),
    ("level1:pipeline", "allreduce", "pipeline"),
    ("level0:null;level1:NHR_V1", "allreduce", "NHR_V1"),
    ("allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R", "allgather", "H-D_R"),
    ("allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R", "allreduce", "ring"),
    ("alltoall=level0:NA;level1:pairwise", "alltoallv", "pairwise"),
    ("others=level0:NA;level1:NB", "scatter", "NB"),
])
def test_documented_forms_parse(text, op, level1):
    assert parse_hccl_algo(text).levels_for(op)["level1"] == level1


def test_empty_means_hccl_selection_and_unlisted_operator_falls_back():
    assert parse_hccl_algo("") is None and parse_hccl_algo(None) is None and parse_hccl_algo("   ") is None
    assert parse_hccl_algo("allreduce=level0:NA;level1:ring").levels_for("broadcast") is None


@pytest.mark.parametrize("text,needle", [
    ("level0:NA;level1:hd", "'hd' is not an HCCL algorithm"),
    ("level0:NA;level1:nhr", "'nhr' is not an HCCL algorithm (names are case-sensitive"),
    ("level0:ring;level1:NHR", "level0 accepts only NA"),
    ("level0:NA;level1:ring;level1:NHR", "'level1' is given twice"),
    ("level5:ring", "'level5' is not a level"),
    ("level0:NA;level1:ring;", "cannot start or end"),
    (";level1:ring", "cannot start or end"),
    ("/allreduce=level1:ring", "cannot start or end"),
    ("allreduce=level1:ring/level0:NA;level1:NB", "mixes the global form"),
    ("level0:NA;level1:ring/level0:NA;level1:NB", "the global form appears once"),
    ("allredcue=level0:NA;level1:ring", "'allredcue' is not an HCCL operator key"),
    ("allreduce=level0:NA;level1:ring/allreduce=level0:NA;level1:NB", "'allreduce' is given twice"),
    ("allreduce=level0:null;level1:ring", "not allowed in the per-operator form"),
    ("level0:NA;level2:pairwise", "level2 accepts ring, H-D_R, NHR, NB, pipeline"),
    ("level0NA", "is not '<level>:<algo>'"),
    ("allreduce=", "cannot start or end"),
])
def test_malformed_strings_say_which_part_and_what_hccl_accepts(text, needle):
    with pytest.raises(ConfigError) as exc:
        parse_hccl_algo(text)
    msg = str(exc.value)
    assert needle in msg and "HCCL accepts" in msg and "\n" not in msg
