"""The driver window of a Neuron release (issue 46): driver_min, the rules Neuron states in either direction, the
newest driver the catalog has read; one decision (catalog.releases.driver_fit) every check uses."""

from __future__ import annotations

import yaml

from neuronkit.catalog import releases
from neuronkit.kubernetes import prejob
from tests.conftest import ROOT

CATALOG = ROOT / "neuronkit" / "catalog"
DRIVER_2_29 = "Neuron Driver 2.29 requires Neuron Runtime Library 2.33 or later."


def test_a_newer_driver_is_not_always_compatible_the_one_sided_rule_stays_gone() -> None:
    """The rule the catalog used to state ("a Neuron runtime needs a driver at least as new as its own release's, never
    the reverse") is wrong: Neuron 2.31.0's runtime notes say driver 2.29 needs runtime 2.33. A 2.28.1 node (runtime
    2.30) with driver 2.29.0.0 lies outside its window, and the reason quotes the note. Restoring the one-sided rule
    (dropping the rule, or accepting every driver at or above driver_min) fails here."""
    rule = next(r for r in releases.driver_rules() if r.kind == "driver_needs_runtime")
    assert rule.quote.startswith(DRIVER_2_29) and "nrt_init()" in rule.quote
    assert releases.source_url(rule.source)
    for version in ("2.28.1", "2.29.1", "2.30.0"):
        fit = releases.driver_fit("2.29.0.0", version)
        assert not fit.ok and fit.rule == rule.id, version
        assert DRIVER_2_29 in fit.reason and "2.29.0.0" in fit.reason and f"Neuron {version}" in fit.reason
    assert releases.driver_fit("2.29.0.0", "2.31.1").ok  # runtime 2.33: the rule is met
    assert releases.driver_fit("2.28.0.0", "2.28.1").ok  # above driver_min, below the rule: inside
    for path in (CATALOG / "eks.yaml", ROOT / "docs" / "neuron-releases.md", ROOT / "docs" / "eks.md"):
        words = " ".join(path.read_text().replace("#", " ").split())
        assert "never the reverse" not in words, path


def test_the_2_30_runtime_refuses_drivers_2_26_and_older_and_its_row_says_so() -> None:
    row = yaml.safe_load((CATALOG / "neuron_releases.yaml").read_text())["releases"]["2.30.0"]
    assert "not backward-compatible with Neuron Driver 2.26 or earlier" in " ".join(row["driver_min_source"].split())
    fit = releases.driver_fit("2.26.10.0", "2.30.0")
    assert not fit.ok and fit.rule == "runtime-2.32-refuses-driver-2.26" and "2.26 or earlier" in fit.reason


def test_each_release_lists_the_rules_that_bind_it_each_quoted_with_a_source() -> None:
    data = yaml.safe_load((CATALOG / "neuron_releases.yaml").read_text())
    for r in releases.releases():
        declared = data["releases"][r.version]["driver_rules"]
        assert declared == [x.id for x in releases.driver_window(r.version).rules], r.version
    for rule in releases.driver_rules():
        assert rule.quote and rule.source in releases.sources(), rule.id


def test_a_driver_newer_than_any_the_catalog_has_read_is_outside_every_window() -> None:
    read = releases.driver_read()
    assert read.driver == releases.release(read.release).driver_shipped  # the mark is the newest release's driver
    assert read.release == releases.versions()[-1]
    major, minor, *_ = read.driver.split(".")
    newer = f"{major}.{minor}.{int(_[0]) + 1}.0"
    for version in releases.versions():
        fit = releases.driver_fit(newer, version)
        assert not fit.ok and fit.rule == "driver_read", version
        assert read.driver in fit.reason and version in fit.reason


def test_the_prejob_node_check_decides_as_driver_fit() -> None:
    """prejob.py (standard library, in the job's container) takes the window node_check_args renders: its decision
    equals driver_fit's for drivers on every side of every window."""
    drivers = ["2.26.4.0", "2.26.5.0", "2.26.10.0", "2.27.4.0", "2.28.0.0", "2.29.0.0", "2.30.2.0", "2.31.7.0", "2.31.8.0"]
    checked = 0
    for version in releases.versions():
        w = releases.driver_window(version)
        rel = releases.release(version)
        for d in drivers:
            out = prejob.check_driver(
                "n1", d, w.low, rel.driver_shipped, release=version, below=w.high, below_rule=w.high_rule,
                read=w.read, read_rule=w.read_rule,
            )  # fmt: skip
            assert out.ok == releases.driver_fit(d, version).ok, (version, d, out.reason)
            if not out.ok:
                assert d in out.reason and (version in out.reason or w.low in out.reason), out.reason
            checked += 1
    assert checked == len(drivers) * len(releases.versions())


def test_the_boot_check_bound_decides_as_driver_fit_above_the_floor() -> None:
    """node-lib.sh gets one bound (DRIVER_LIMIT: at or above it fails, with DRIVER_RULE) besides driver_min: for every
    release it refuses exactly the drivers above driver_min that driver_fit refuses (sort -V order, as the shell)."""
    from neuronkit import userdata

    drivers = ["2.28.0.0", "2.28.9.0", "2.29.0.0", "2.30.2.0", "2.31.7.0", "2.31.7.1", "2.31.8.0", "2.40.0.0"]
    checked = 0
    for version in releases.versions():
        rel = releases.release(version)
        values = userdata.boot_values(driver_min=rel.driver_min, driver_shipped=rel.driver_shipped, release=version)
        limit, rule = str(values["DRIVER_LIMIT"]), str(values["DRIVER_RULE"])
        assert limit and rule.startswith(f"Neuron {version}: ")
        for d in drivers:
            if releases.version_key(d) < releases.version_key(rel.driver_min):
                continue
            refused = releases.version_key(d) >= releases.version_key(limit)
            assert refused == (not releases.driver_fit(d, version).ok), (version, d, limit)
            checked += 1
    assert checked > len(releases.versions())
