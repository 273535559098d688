"""``shared_name``: how the lowered step names what an exchange named after its uid
(``compiled/shared_functions.py``); a uid that begins another (``halo_0_9``, ``halo_0_90``)
must not rename the other's names."""

from gt4py_halo.compiled.shared_functions import shared_name


def test_the_uid_becomes_gh_where_it_is_a_whole_part_of_a_name() -> None:
    assert shared_name("halo_0_9_sarena_0", "halo_0_9") == "gh_sarena_0"
    assert shared_name("_halo_0_9_sarena_0", "halo_0_9") == "_gh_sarena_0"  # a connector
    assert shared_name("IN_halo_0_9_rarena_1", "halo_0_9") == "IN_gh_rarena_1"
    assert shared_name("halo_0_9", "halo_0_9") == "gh"


def test_names_of_another_exchange_stay() -> None:
    assert shared_name("halo_0_90_pack_0_5", "halo_0_9") == "halo_0_90_pack_0_5"
    assert shared_name("xhalo_0_9_pack", "halo_0_9") == "xhalo_0_9_pack"
    assert shared_name("__strides10_0", "halo_0_1") == "__strides10_0"
