"""What a profile is: one name type, every rule per profile, and suite tables that cover every profile."""

import json

import pytest

from suites.core.profiles import NAMES, RULES, Profile, rules, search_plan, searches_serving
from suites.distributed import collectives, parallel_step
from suites.ops import attention, conv, matmul
from suites.plan import collect
from suites.training import autocast_audit, batch_size, numerics, train_step

# The suites' own per-profile tables (sizes, models, limits).
TABLES = {"matmul.SHAPES": matmul.SHAPES, "matmul.LEVER_SHAPES": matmul.LEVER_SHAPES, "conv.LAYERS": conv.LAYERS,
          "train_step.PROFILES": train_step.PROFILES,
          "batch_size.PROFILES": batch_size.PROFILES, "numerics.MODELS": numerics.MODELS,
          "autocast_audit.MODELS": autocast_audit.MODELS, "collectives.SIZES": collectives.SIZES,
          "distributed.train_step.SMALL_BUCKET_MB": parallel_step.SMALL_BUCKET_MB}


def test_a_profile_is_its_plain_name_wherever_it_goes():
    assert NAMES == ("quick", "full", "exhaustive") and Profile("quick") is Profile.QUICK
    assert f"{Profile.FULL}" == str(Profile.FULL) == "full" and json.dumps([Profile.QUICK]) == '["quick"]'
    assert {"quick": 1}[Profile.QUICK] == 1 and {Profile.QUICK: 1}["quick"] == 1


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_suite_table_covers_every_profile(name):
    assert set(TABLES[name]) == {profile.sizes for profile in Profile} == {Profile.QUICK, Profile.FULL}
    assert all(isinstance(key, Profile) for key in TABLES[name])


def test_every_profile_has_every_rule():
    assert set(RULES) == {profile.sizes for profile in Profile}
    assert rules("exhaustive") == rules("full")
    for profile in NAMES:
        r = rules(profile)
        assert r.lockstep().count == r.lockstep_samples and r.lockstep().target_rel_iqr == r.stop.target_rel_iqr
        assert {search_plan(device, profile).rule for device in ("cpu", "cuda")} <= {p.rule for p in r.search.values()}
    # full measures longer and tighter than quick, in each role
    quick, full = rules("quick"), rules("full")
    assert full.stop.target_rel_iqr < quick.stop.target_rel_iqr and full.stop.timeout_s > quick.stop.timeout_s
    assert full.lockstep_samples > quick.lockstep_samples
    assert search_plan("cuda", "full").gemm_budget_s > search_plan("cuda", "quick").gemm_budget_s
    assert searches_serving("full") == (Profile.FULL,) and searches_serving("quick") == (Profile.FULL, Profile.QUICK)


def test_an_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="'medium' is not a valid Profile"):
        rules("medium")


def test_exhaustive_is_full_with_the_axes_that_repeat_on_hopper():
    """Every case of full is in exhaustive with the same id, params and models; exhaustive adds float16 where it
    runs bfloat16's kernels (attention's fused kernels and naive, conv) and the math backend in every dtype, and
    nothing else; full keeps each of them at one point, so no implementation or dtype is missing from it."""
    full, every = collect("full"), collect("exhaustive")
    added = {}
    for suite in full:
        ids = {c.id: c for c in every[suite]}
        assert all(ids[c.id].params == c.params and ids[c.id].flops == c.flops for c in full[suite]), suite
        added[suite] = [c for c in every[suite] if c.id not in {c.id for c in full[suite]}]
    assert {suite for suite, cases in added.items() if cases} == {"attention", "conv"}
    assert all(c.params["dtype"] == "float16" or c.params["impl"] == "math" for c in added["attention"])
    assert {c.params["dtype"] for c in added["conv"]} == {"float16"}
    assert len(added["attention"]) == 321 and len(added["conv"]) == 64
    paths = {(c.params["impl"], c.params["dtype"]) for c in full["attention"]}
    assert paths == {(impl, dtype) for impl, dtypes in attention.IMPL_DTYPES.items() for dtype in dtypes}
    assert {c.params["dtype"] for c in full["conv"]} == set(conv.CONV_DTYPES)
