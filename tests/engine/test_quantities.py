import pytest

from scheduling.engine.quantities import QuantityError, ResourceList, format_resource, parse_quantity, parse_resource


@pytest.mark.parametrize("text, milli, expected", [
    ("500m", True, 500),
    ("2", True, 2000),
    ("1.5", True, 1500),
    ("0.1", True, 100),
    ("1.5m", True, 2),  # rounded up, as the API does
    (2, True, 2000),
    (0.25, True, 250),
    ("1.5Gi", False, 1610612736),
    ("100Mi", False, 104857600),
    ("1Ki", False, 1024),
    ("1k", False, 1000),
    ("1M", False, 1_000_000),
    ("1G", False, 1_000_000_000),
    ("1e3", False, 1000),
    ("1E3", False, 1000),
    ("2E", False, 2 * 10**18),
    ("12e-1", False, 2),
    ("128974848", False, 128974848),
    (".5Gi", False, 536870912),
    ("+1", False, 1),
    ("1n", True, 1),
])
def test_parse(text, milli, expected):
    assert parse_quantity(text, milli=milli) == expected


@pytest.mark.parametrize("bad", ["abc", "", "1.5.5", "Gi", "1 Gi", "1gi", "1KiB", "--1", True, None, [1], {"a": 1}, float("nan")])
def test_bad_quantity_names_the_value(bad):
    with pytest.raises(QuantityError) as info:
        parse_quantity(bad)
    if isinstance(bad, str):
        assert f'"{bad}" is not a quantity' == str(info.value)


def test_negative_and_huge_values_are_refused():
    with pytest.raises(QuantityError, match="must not be negative"):
        parse_quantity("-1")
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity("1e999")


def test_parse_resource_uses_millicores_for_cpu_only():
    assert parse_resource("cpu", "2") == 2000
    assert parse_resource("memory", "2") == 2
    assert parse_resource("nvidia.com/gpu", "8") == 8


def test_resource_list_operations():
    a = ResourceList.parse({"cpu": "1", "memory": "1Gi"})
    b = ResourceList.parse({"cpu": "500m", "pods": 1})
    assert a.add(b) == {"cpu": 1500, "memory": 2**30, "pods": 1}
    assert a.sub(b) == {"cpu": 500, "memory": 2**30, "pods": 0}
    assert b.sub(a) == {"cpu": 0, "pods": 1, "memory": 0}  # floors at zero
    assert b.fits(a.add({"pods": 1}))
    assert not b.fits(a)  # pods missing counts as zero
    assert a.exceeding({"cpu": 999, "memory": 2**30}) == ["cpu"]
    assert a.max({"cpu": 3000}) == {"cpu": 3000, "memory": 2**30}
    assert a == {"cpu": 1000, "memory": 2**30}  # operations never mutate


def test_formatting():
    assert format_resource("cpu", 96000) == "96"
    assert format_resource("cpu", 1500) == "1500m"
    assert format_resource("memory", 4 * 2**30) == "4Gi"
    assert format_resource("memory", 100 * 2**20) == "100Mi"
    assert ResourceList({"memory": 2**30, "cpu": 250, "pods": 0}).format() == "cpu=250m, memory=1Gi"


def test_display_as_kubernetes_people_read_it():
    show = format_resource
    assert [show("cpu", m) for m in (0, 250, 1000, 96000, 2**53)] == ["0", "250m", "1", "96", f"{2**53}m"]
    # Binary first, with a count a person reads at a glance; a decimal suffix only when exact.
    assert show("memory", 2**40) == "1Ti" and show("memory", 256 * 2**20) == "256Mi"
    assert show("memory", 7577 * 2**20) == "7577Mi"  # an m5.large node's memory, as kubectl shows it
    assert show("memory", 10**9) == "1G" and show("ephemeral-storage", 20 * 10**9) == "20G"
    # Not exact in any unit: three figures of the largest binary unit, zeros kept so it reads rounded.
    assert show("memory", 1938410 * 2**20) == "1.85Ti"
    assert show("memory", 3 * 2**30 + 1) == "3.00Gi"
    assert show("memory", 1500) == "1.46Ki" and show("memory", 512) == "512" and show("memory", 0) == "0"
    assert show("memory", 2**63) == "8Ei" and show("memory", 2**63 - 1) == "8.00Ei"
    assert show("pods", 110) == "110" and show("nvidia.com/gpu", 8) == "8"
