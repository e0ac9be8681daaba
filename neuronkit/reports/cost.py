"""What an environment's pools cost On-Demand, what the same capacity would cost on GPUs, and what a change costs.

Prices come from ``neuronkit/catalog/prices.json`` (hourly, per region) and the GPU comparison from
``neuronkit/catalog/equivalents.yaml``; a month is the table's ``hours_per_month``. Each pool is priced at
its minimum, desired and maximum node count on its primary type (for an inference fleet, the first Neuron
type: the Auto Scaling group launches it first). :func:`cost_report` renders one or more environments;
:func:`diff_report` renders the change between two synths (a pull request's cost) as Markdown or text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit import catalog
from neuronkit.catalog import pricing, serving
from neuronkit.catalog.pricing import Equivalent, MissingPriceError, PriceTable
from neuronkit.reports.pools import Pool

LEVELS = ("min", "desired", "max")
FORMATS = ("text", "markdown")
DASH = "–"


# --------------------------------------------------------------------------------------------
# pricing pools
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolCost:
    """One pool priced on its primary type, with the same node counts priced on the GPU equivalent."""

    pool: Pool
    instance_type: str
    hourly_price: float
    hours_per_month: float
    gpu_type: str | None = None
    gpu_hourly_price: float | None = None
    notes: tuple[str, ...] = ()
    gpu_is_fallback: bool = False  # gpu_type is the pool's own GPU fallback (on EKS: its fallback node group's)

    @property
    def block(self) -> bool:
        """Priced as a Capacity Block by its fee: the same cost at every level, paid whether nodes run or not."""
        return self.pool.block_fee is not None and bool(self.pool.block_hours)

    @property
    def hours_billed_per_month(self) -> float:
        """Hours a month the pool bills: all of them, or a Capacity Block's duration when shorter than a month."""
        if self.block and self.pool.block_hours is not None:
            return min(self.pool.block_hours, self.hours_per_month)
        return self.hours_per_month

    def nodes(self, level: str) -> int:
        if self.block:
            return self.pool.max_size  # the block's schedule runs the cluster at max_size for the whole block
        return {"min": self.pool.min_size, "desired": self.pool.desired_size, "max": self.pool.max_size}[level]

    def hourly(self, level: str) -> float:
        return self.nodes(level) * self.hourly_price

    def monthly(self, level: str) -> float:
        return self.nodes(level) * self.hourly_price * self.hours_billed_per_month

    @property
    def compared(self) -> bool:
        return self.gpu_hourly_price is not None

    def gpu_monthly(self, level: str) -> float | None:
        if self.gpu_hourly_price is None:
            return None
        return self.nodes(level) * self.gpu_hourly_price * self.hours_billed_per_month

    def gpu_or_own_monthly(self, level: str) -> float:
        """The GPU-equivalent cost, or the pool's own cost when it has no equivalent (GPU pools)."""
        gpu = self.gpu_monthly(level)
        return self.monthly(level) if gpu is None else gpu


def _is_gpu(instance_type: str) -> bool:
    known = catalog.instance_types().get(instance_type)
    return known is not None and known.accelerator == "gpu"


def price_pools(
    pools: Iterable[Pool],
    table: PriceTable | None = None,
    equivalents: dict[str, Equivalent] | None = None,
) -> list[PoolCost]:
    """Price every pool; :class:`MissingPriceError` lists every primary type the table cannot price."""
    table = table or pricing.load_prices()
    equivalents = pricing.equivalents() if equivalents is None else equivalents
    out: list[PoolCost] = []
    problems: list[str] = []
    pools = list(pools)
    # platform: eks: a fleet's GPU fallback is a node group of its own; its Metadata names the fleet (fallback_for).
    # A served fleet has one per GPU type, in its priority order: the first is the one it falls back to first.
    eks_fallback: dict[tuple[str, str | None], Pool] = {}
    for p in pools:
        if p.fallback_for:
            eks_fallback.setdefault((p.environment, p.fallback_for), p)
    for pool in pools:
        primary = pool.primary_type
        price = table.hourly(primary, pool.region)
        if pool.block_fee is not None and pool.block_hours and pool.max_size:
            # A Capacity Block is paid up front: its rate per node-hour is the fee over the block's node-hours.
            price = pool.block_fee / (pool.block_hours * pool.max_size)
        elif price is None and pool.capacity == "capacity-block":
            message = (
                f"{pool.label} ({pool.role}): a Capacity Block is priced by what it cost and {primary} has no On-Demand "
                f"price to stand in; set capacity.upfront_fee_usd to the block's UpfrontFee (`neuronkit capacity offerings` "
                "shows it, and so does the purchase)"
            )
            if message not in problems:
                problems.append(message)
            continue
        if price is None:
            message = f"{pool.label} ({pool.role}): {table.missing_message(primary, pool.region)}"
            if message not in problems:
                problems.append(message)
            continue
        notes = list(_pool_notes(pool, table))
        gpu_type: str | None = None
        gpu_price: float | None = None
        equivalent = equivalents.get(primary)
        own = next((t for t in pool.fallback_types if _is_gpu(t)), None)
        sibling = eks_fallback.get((pool.environment, pool.pool))
        if own is None and sibling is not None:
            own = next((t for t in sibling.instance_types if _is_gpu(t)), None)
        whose = (
            f"the first type of its GPU fallback node group {sibling.pool}"
            if sibling is not None and own not in pool.fallback_types
            else "its first GPU fallback_types entry"
        )
        if pool.role == "training-gpu" or _is_gpu(primary):
            notes.append(f"{primary} is a GPU type: no GPU equivalent; counted at its own price in the GPU-equivalent total.")
        elif own is not None:
            # The GPU the fleet really runs when Neuron capacity is short: its own fallback, not a catalog pairing.
            gpu_type = own
            gpu_price = table.hourly(own, pool.region)
            instead = (
                f", not the catalog's equivalent {equivalent.gpu_type}"
                if equivalent is not None and equivalent.gpu_type != own
                else ""
            )
            notes.append(f"GPU comparison: {own}, the pool's own GPU fallback ({whose}){instead}.")
            if gpu_price is None:
                notes.append(f"GPU comparison skipped: {table.missing_message(own, pool.region)}.")
        elif equivalent is None:
            notes.append(f"No GPU equivalent for {primary} in neuronkit/catalog/equivalents.yaml; counted at its own price.")
        else:
            gpu_type = equivalent.gpu_type
            gpu_price = table.hourly(gpu_type, pool.region)
            if gpu_price is None:
                notes.append(f"GPU comparison skipped: {table.missing_message(gpu_type, pool.region)}.")
        out.append(
            PoolCost(
                pool=pool,
                instance_type=primary,
                hourly_price=price,
                hours_per_month=table.hours_per_month,
                gpu_type=gpu_type,
                gpu_hourly_price=gpu_price,
                notes=tuple(notes),
                gpu_is_fallback=gpu_type is not None and gpu_type == own,
            )
        )
    if problems:
        raise MissingPriceError(problems)
    return out


def _pool_notes(pool: Pool, table: PriceTable) -> Iterable[str]:
    if len(pool.instance_types) > 1:
        others = []
        for t in pool.instance_types:
            if t == pool.primary_type:
                continue
            price = table.hourly(t, pool.region)
            others.append(f"{t} ({rate(price)}/hour)" if price is not None else f"{t} (no price in the table)")
        yield (
            f"Launch order: {', '.join(pool.instance_types)}. Priced on the primary type {pool.primary_type}; "
            f"nodes launched on another type cost its price: {', '.join(others)}."
        )
    fallback = [(t, table.hourly(t, pool.region)) for t in pool.fallback_types if t not in pool.neuron_types]
    priced = [(t, p) for t, p in fallback if p is not None]
    if pool.role == "inference" and priced:
        # The bound a user plans for: Neuron capacity short everywhere, every node on the dearest fallback type.
        level = "desired" if pool.desired_size else "max"
        nodes = pool.desired_size or pool.max_size
        dearest, hourly = max(priced, key=lambda tp: tp[1])
        yield (
            f"GPU fallback: if no Neuron capacity can be had, at {level} capacity the fleet would cost up to "
            f"{usd(nodes * hourly * table.hours_per_month)} a month on {dearest} ({nodes} x {rate(hourly)}/hour)."
        )
    compile_prices = [(t, table.hourly(t, pool.region)) for t in pool.compile_types]
    if compile_prices:
        lock_hours = serving.facts()["compiled_cache"]["lock_timeout_seconds"] / 3600
        shown = ", ".join(f"{t} ({rate(p)}/hour)" if p is not None else f"{t} (no price in the table)" for t, p in compile_prices)
        yield (
            f"Rollouts: a deploy that changes a compiled-artifact key first runs one compile node per Neuron type "
            f"({shown}) until its key is compiled (a compile may take up to {lock_hours:g} hours); not in the monthly figures."
        )
    if pool.capacity == "odcr":
        yield (
            "Capacity odcr: an On-Demand Capacity Reservation bills every reserved instance at the On-Demand rate "
            "from its creation, used or not; a row counting fewer nodes than the reservation holds understates the bill."
        )
    elif pool.capacity == "capacity-block" and pool.block_fee is not None and pool.block_hours:
        months = pool.block_hours / table.hours_per_month
        spread = "" if months <= 1 else f"; the month columns spread it over the block's {months:.1f} months"
        yield (
            f"Capacity capacity-block: {usd(pool.block_fee)} paid up front for {pool.block_hours:,.0f} hours of "
            f"{pool.max_size} nodes, whether they run or not ({rate(pool.block_fee / pool.block_hours)}/hour for the "
            f"block; every level counts all {pool.max_size} nodes{spread}). The GPU equivalent is priced for the same hours."
        )
    elif pool.capacity == "capacity-block":
        yield (
            "Capacity capacity-block: a Capacity Block for ML is paid up front at its own rate, not the On-Demand "
            "rate used here; these figures are the On-Demand equivalent (set capacity.upfront_fee_usd to price the block)."
        )


# --------------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------------
def _cents(x: float) -> float:
    return 0.0 if abs(x) < 0.005 else x


def usd(x: float) -> str:
    """$1,234.56 (negative: -$1,234.56)."""
    x = _cents(x)
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def signed_usd(x: float) -> str:
    """+$1,234.56, -$1,234.56 or $0.00."""
    x = _cents(x)
    return f"+{usd(x)}" if x > 0 else usd(x)


def rate(x: float) -> str:
    """An hourly price with all its digits (at least cents): $2.50, $0.125, $1.234567."""
    text = f"{x:,.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"


def percent(part: float, whole: float, *, signed: bool = False) -> str:
    if _cents(whole) == 0:
        return DASH
    value = part / whole * 100
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


@dataclass
class _Table:
    headers: list[str]
    rows: list[list[str]]
    align: str  # one "l" or "r" per column


@dataclass
class _Doc:
    """Headings, paragraphs, lists and tables, each kept as Markdown (for PR comments) and as plain text."""

    blocks: list[tuple[str, str]] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append((f"{'#' * level} {text}", f"{text}\n{('=' if level <= 2 else '-') * len(text)}"))

    def para(self, text: str) -> None:
        self.blocks.append((text, text))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            text = "\n".join(f"- {item}" for item in items)
            self.blocks.append((text, text))

    def table(self, headers: list[str], rows: list[list[str]], align: str) -> None:
        t = _Table(headers, rows, align)
        self.blocks.append((_markdown_table(t), _text_table(t)))

    def render(self, fmt: str) -> str:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return "\n\n".join(md if fmt == "markdown" else text for md, text in self.blocks) + "\n"


def _markdown_table(t: _Table) -> str:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = "|" + "|".join("---:" if a == "r" else "---" for a in t.align) + "|"
    return "\n".join([row(t.headers), rule, *(row(r) for r in t.rows)])


def _text_table(t: _Table) -> str:
    widths = [max(len(r[i]) for r in [t.headers, *t.rows]) for i in range(len(t.headers))]

    def row(cells: list[str]) -> str:
        parts = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, t.align, strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([row(t.headers), "  ".join("-" * w for w in widths), *(row(r) for r in t.rows)])


def _basis(table: PriceTable) -> str:
    return (
        f"On-Demand Linux list prices in {table.currency} as of {table.as_of} from {table.shown_path}; "
        f"a month is {table.hours_per_month:g} hours. Refresh the prices with `{pricing.REFRESH_COMMAND}`."
    )


# --------------------------------------------------------------------------------------------
# neuronkit cost
# --------------------------------------------------------------------------------------------
def _groups(costs: list[PoolCost]) -> dict[tuple[str, str], list[PoolCost]]:
    groups: dict[tuple[str, str], list[PoolCost]] = {}
    for c in sorted(costs, key=lambda c: (c.pool.environment, c.pool.region)):
        groups.setdefault((c.pool.environment, c.pool.region), []).append(c)
    return groups


def _total_rows(costs: list[PoolCost]) -> list[list[str]]:
    rows = []
    for level in LEVELS:
        own = sum(c.monthly(level) for c in costs)
        gpu = sum(c.gpu_or_own_monthly(level) for c in costs)
        rows.append(
            [
                level,
                usd(sum(c.hourly(level) for c in costs)),
                usd(own),
                usd(gpu),
                usd(gpu - own),
                percent(gpu - own, gpu),
            ]
        )
    return rows


TOTAL_HEADERS = ["capacity", "$/hour", "$/month", "on GPU equivalents $/month", "saving $/month", "saving"]


def cost_report(pools: Sequence[Pool], fmt: str = "text", table: PriceTable | None = None) -> str:
    """Per pool: type, nodes, $/hour and $/month at min/desired/max, the GPU-equivalent cost and the saving."""
    table = table or pricing.load_prices()
    costs = price_pools(pools, table)
    doc = _Doc()
    doc.heading(1, "neuronkit cost")
    doc.para(_basis(table))
    if not costs:
        doc.para("No pools: the environment has no training clusters or inference fleets.")
        return doc.render(fmt)
    groups = _groups(costs)
    for (env, region), group in groups.items():
        doc.heading(2, f"{env} ({region})")
        for c in group:
            p = c.pool
            where = f", stack {p.stack}" if p.stack else ""
            doc.heading(3, f"{p.pool}: {p.role}, {', '.join(p.instance_types)}, capacity {p.capacity}{where}")
            line = f"{c.instance_type} at {rate(c.hourly_price)}/hour"
            if c.block:
                line += (
                    " (your input: capacity.upfront_fee_usd over the block's node-hours; a price you entered, not one the "
                    "kit read or measured)"
                )
            if c.gpu_type and c.gpu_hourly_price is not None:
                line += (
                    f"; GPU {'fallback' if c.gpu_is_fallback else 'equivalent'} {c.gpu_type} at {rate(c.gpu_hourly_price)}/hour"
                )
            doc.para(line + ".")
            headers = ["capacity", "nodes", "$/hour", "$/month"]
            align = "lrrr"
            if c.compared:
                # A difference computed from a price the user typed in is an input's consequence, not a measured saving.
                diff = "difference from your input $/month" if c.block else "saving $/month"
                headers += [f"{c.gpu_type} $/month", diff, "difference" if c.block else "saving"]
                align += "rrr"
            rows = []
            for level in LEVELS:
                row = [level, str(c.nodes(level)), usd(c.hourly(level)), usd(c.monthly(level))]
                gpu = c.gpu_monthly(level)
                if gpu is not None:
                    row += [usd(gpu), usd(gpu - c.monthly(level)), percent(gpu - c.monthly(level), gpu)]
                rows.append(row)
            doc.table(headers, rows, align)
            if p.reserved:
                # A created ODCR bills every hour at the On-Demand rate, whether its instances run or not.
                doc.para(
                    f"Reservation: {p.reserved} x {c.instance_type} reserved by the stack, billed whether used or not: "
                    f"{usd(p.reserved * c.hourly_price)}/hour, {usd(p.reserved * c.hourly_price * c.hours_per_month)}/month "
                    f"(the running cost above is part of it, not added to it)."
                )
            doc.bullets(c.notes)
        doc.heading(3, f"Total: {env} ({region})")
        doc.table(TOTAL_HEADERS, _total_rows(group), "lrrrrr")
        inputs = [c.pool.pool for c in group if c.block]
        if inputs:
            doc.para(
                f"The total prices {', '.join(inputs)} from your capacity.upfront_fee_usd: an input you entered, so its "
                "share of the saving is a consequence of that input, not a saving the kit measured."
            )
    if len(groups) > 1:
        doc.heading(2, f"Total: {len(groups)} environments")
        doc.table(TOTAL_HEADERS, _total_rows(costs), "lrrrrr")
    doc.para(
        "The GPU equivalents (neuronkit/catalog/equivalents.yaml) compare list prices of comparable capacity, "
        "not throughput; a negative saving means the Neuron capacity costs more per hour. See docs/cost.md."
    )
    return doc.render(fmt)


# --------------------------------------------------------------------------------------------
# neuronkit cost --diff
# --------------------------------------------------------------------------------------------
def _shape(c: PoolCost) -> tuple[object, ...]:
    p = c.pool
    return (p.region, p.instance_types, p.min_size, p.desired_size, p.max_size, p.capacity, c.hourly_price)


def _nodes(c: PoolCost | None) -> str:
    return DASH if c is None else f"{c.pool.min_size}/{c.pool.desired_size}/{c.pool.max_size}"


def _change_rows(before: PoolCost | None, after: PoolCost | None) -> list[list[str]]:
    rows = [
        [
            "instance types",
            DASH if before is None else ", ".join(before.pool.instance_types),
            DASH if after is None else ", ".join(after.pool.instance_types),
            "",
        ],
        ["nodes min/desired/max", _nodes(before), _nodes(after), ""],
    ]
    if (before and before.pool.capacity) != (after and after.pool.capacity):
        rows.append(["capacity", before.pool.capacity if before else DASH, after.pool.capacity if after else DASH, ""])
    for level in LEVELS:
        old = before.monthly(level) if before else 0.0
        new = after.monthly(level) if after else 0.0
        rows.append([f"$/month at {level}", usd(old), usd(new), _delta(old, new)])
    return rows


def _sum_monthly(costs: Iterable[PoolCost], level: str) -> float:
    return sum(c.monthly(level) for c in costs)


def _delta(old: float, new: float) -> str:
    change = new - old
    if _cents(old) == 0:
        return signed_usd(change)
    return f"{signed_usd(change)} ({percent(change, old, signed=True)})"


def diff_report(
    old_pools: Sequence[Pool],
    new_pools: Sequence[Pool],
    fmt: str = "markdown",
    table: PriceTable | None = None,
) -> str:
    """The monthly cost change between two synths: a table per changed, added or removed pool, and the total."""
    table = table or pricing.load_prices()
    old = {c.pool.key: c for c in price_pools(old_pools, table)}
    new = {c.pool.key: c for c in price_pools(new_pools, table)}
    doc = _Doc()
    doc.heading(2, "neuronkit cost change")
    totals = {level: (_sum_monthly(old.values(), level), _sum_monthly(new.values(), level)) for level in LEVELS}
    before, after = totals["desired"]
    keys = sorted(old.keys() | new.keys())
    same = {k for k in keys if k in old and k in new and _shape(old[k]) == _shape(new[k])}
    if len(same) == len(keys):
        doc.para(f"No change in On-Demand cost: {len(new)} pool(s), {usd(after)} a month at desired capacity.")
    else:
        top, peak = totals["max"]
        doc.para(
            f"Monthly On-Demand cost at desired capacity: {usd(before)} → {usd(after)}, {_delta(before, after)}; "
            f"at max capacity: {usd(top)} → {usd(peak)}, {_delta(top, peak)}."
        )
    doc.para(_basis(table))

    def name(key: tuple[str, str, str]) -> str:
        env, pool, role = key
        return f"{env}/{pool} ({role})"

    unchanged: list[str] = []
    for key in keys:
        b, a = old.get(key), new.get(key)
        if key in same:
            unchanged.append(f"{name(key)}: {usd(new[key].monthly('desired'))} a month at desired capacity")
            continue
        state = "added" if b is None else "removed" if a is None else "changed"
        doc.heading(3, f"{name(key)}: {state}")
        doc.table(["", "before", "after", "change"], _change_rows(b, a), "lrrr")
    if unchanged:
        doc.heading(3, "Unchanged pools")
        doc.bullets(unchanged)
    doc.heading(3, "Total")
    rows = [["pools", str(len(old)), str(len(new)), f"{len(new) - len(old):+d}" if len(new) != len(old) else ""]]
    for level in LEVELS:
        b_total, a_total = totals[level]
        rows.append([f"$/month at {level}", usd(b_total), usd(a_total), _delta(b_total, a_total)])
    doc.table(["", "before", "after", "change"], rows, "lrrr")
    return doc.render(fmt)


# --------------------------------------------------------------------------------------------
# what the environment costs besides its pools
# --------------------------------------------------------------------------------------------
# The kinds of fixed charge (what an environment costs besides its pools), as validate's budget line and the summary
# name them: the summary (from cdk.out) names the same kinds it finds in the templates, so the totals reconcile.
FIXED_KINDS = ("EKS control plane", "EKS system nodes", "NAT gateways", "interface endpoints", "load balancers", "FSx for Lustre")


@dataclass(frozen=True)
class FixedCost:
    environment: str
    item: str
    monthly: float
    basis: str  # how it was computed and where the price comes from
    kind: str = ""  # one of FIXED_KINDS

    def text(self) -> str:
        return f"{self.item} {usd(self.monthly)}"


def _service_prices() -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load((Path(catalog.__file__).with_name("service_prices.yaml")).read_text())
    return data


def eks_control_plane_cost(environment: str, hours: float) -> FixedCost:
    """The EKS cluster's control plane in standard support (catalog/eks.yaml; extended support costs more)."""
    fees = catalog.eks_facts()["extended_support"]
    rate = float(fees["standard_usd_per_cluster_hour"])
    basis = f"1 cluster x ${rate}/hour in standard support (${fees['extended_usd_per_cluster_hour']}/hour in extended support)"
    return FixedCost(environment, "EKS control plane", rate * hours, basis, "EKS control plane")


def eks_system_nodes_cost(env: Any, hours: float) -> FixedCost:
    """The system node group (add-ons and controllers) at its desired size, on-demand (catalog/eks.yaml
    ``system_nodes``). The catalog prices its default type only; another type is listed unpriced."""
    facts = catalog.eks_facts()["system_nodes"]
    nodes = env.eks.system_nodes.resolved()
    count, instance_type = int(nodes["desired_size"]), str(nodes["instance_type"])
    if instance_type != str(facts["instance_type"]):
        basis = f"{count} x {instance_type}: not priced (the catalog prices {facts['instance_type']} only)"
        return FixedCost(env.name, "EKS system nodes", 0.0, basis, "EKS system nodes")
    rate = float(facts["usd_per_hour"])
    basis = f"{count} x {instance_type} on-demand at ${rate}/hour"
    return FixedCost(env.name, "EKS system nodes", count * rate * hours, basis, "EKS system nodes")


def fixed_costs(env: Any, table: PriceTable | None = None) -> list[FixedCost]:
    """NAT gateways, interface endpoints, load balancers and the Lustre file system of one environment, at list
    prices (catalog/service_prices.yaml); usage-based charges are left out and the report says so."""
    table = table or pricing.load_prices()
    sp = _service_prices()
    hours = table.hours_per_month
    where = "" if env.region == sp["priced_region"] else f" ({sp['priced_region']} price; {env.region} may differ)"
    out: list[FixedCost] = []
    net = env.network
    if net.existing is None:
        if net.nat_gateways:
            rate = sp["nat_gateway_hour"]["usd"]
            out.append(FixedCost(env.name, f"NAT gateways x{net.nat_gateways}", net.nat_gateways * rate * hours,
                                 f"{net.nat_gateways} x ${rate}/hour{where}; GB processed not included", "NAT gateways"))  # fmt: skip
        endpoints = len(net.interface_endpoints) * len(net.az_ids)
        if endpoints:
            rate = sp["interface_endpoint_az_hour"]["usd"]
            out.append(FixedCost(env.name, f"interface endpoints x{len(net.interface_endpoints)}", endpoints * rate * hours,
                                 f"{len(net.interface_endpoints)} endpoints x {len(net.az_ids)} AZs x ${rate}/hour{where}; GB processed not included", "interface endpoints"))  # fmt: skip
    if getattr(env, "platform", "asg") == "eks":
        # eks.existing: the control plane is the cluster owner's, already paid whatever the kit adds.
        if getattr(getattr(env, "eks", None), "existing", None) is None:
            out.append(eks_control_plane_cost(env.name, hours))
        out.append(eks_system_nodes_cost(env, hours))
    eks = getattr(env, "platform", "asg") == "eks"
    # On EKS a fleet has its ALB when it serves a model (docs/eks.md, "Serving"); without one it is a node group only.
    for f in (f for f in env.inference if not eks or f.model is not None):
        rate = sp["load_balancer_hour"][f.load_balancer]["usd"]
        out.append(FixedCost(env.name, f"{f.load_balancer.upper()} of {f.name}", rate * hours,
                             f"${rate}/hour{where}; LCUs/NLCUs not included", "load balancers"))  # fmt: skip
    lustre = env.storage.lustre
    if lustre is not None:
        prices = sp["lustre_gb_month"][lustre.deployment_type]
        if lustre.deployment_type == "PERSISTENT_2":
            prices = prices[int(lustre.throughput_mbps_per_tib or 125)]
        rate = prices["usd"]
        # AWS bills provisioned capacity; its "GB-month" is the GiB the file system is created with.
        out.append(FixedCost(env.name, f"FSx for Lustre {lustre.deployment_type} {lustre.size_gib} GiB",
                             lustre.size_gib * rate, f"{lustre.size_gib:,} GiB x ${rate}/GB-month{where}", "FSx for Lustre"))  # fmt: skip
    return out


@dataclass(frozen=True)
class BudgetCheck:
    """One environment's monthly estimate (pools plus fixed charges) at min, desired and max against its budget.

    ``enforce`` is the file's ``budget.enforce``: the level that must stay within ``monthly_usd`` (``off``: none).
    ``validate`` and ``cost`` exit 1 when :attr:`over`; raising ``monthly_usd`` in the file is the override.
    """

    environment: str
    monthly_usd: float | None
    enforce: str
    totals: dict[str, float]  # level -> pools at that level plus the fixed charges, a month
    fixed: tuple[FixedCost, ...] = ()  # the fixed charges in the totals (NAT, load balancers, EKS control plane ...)

    def includes(self, level: str) -> str:
        """What the total at ``level`` is made of: pools plus each named fixed charge (the summary's total is the pools
        alone, so the two reconcile by these charges)."""
        charges = sum(f.monthly for f in self.fixed)
        named = ", ".join(f.text() for f in self.fixed) or "none"
        return f"{level} = pools {usd(self.totals[level] - charges)} + fixed charges {usd(charges)} ({named})"

    @property
    def over(self) -> bool:
        return self.monthly_usd is not None and self.enforce in LEVELS and self.totals[self.enforce] > self.monthly_usd

    def levels(self) -> str:
        """min $A, desired $B, max $C (each with its share of the budget when there is one)."""
        parts = []
        for level in LEVELS:
            share = f" ({percent(self.totals[level], self.monthly_usd)})" if self.monthly_usd else ""
            parts.append(f"{level} {usd(self.totals[level])}{share}")
        return ", ".join(parts)

    def verdict(self) -> str:
        """One sentence: the three levels against the budget and what the gate says."""
        if self.monthly_usd is None:
            return f"No budget in the file (budget.monthly_usd); a month costs {self.levels()}."
        head = f"Budget {usd(self.monthly_usd)} a month; estimate {self.levels()}"
        if self.enforce == "off":
            return f"{head}: not enforced (budget.enforce: off)."
        if self.over:
            return (
                f"{head}: **over the budget at {self.enforce}** (budget.enforce: {self.enforce}); lower the sizes or "
                "raise budget.monthly_usd in the file."
            )
        beyond = [lv for lv in LEVELS if self.totals[lv] > self.monthly_usd]
        note = f"; at {beyond[-1]} it would exceed it (not enforced)" if beyond else ""
        return f"{head}: within the budget at {self.enforce} (budget.enforce: {self.enforce}){note}."

    def problem(self, where: str) -> str:
        """The one-line finding ``validate`` and ``cost`` print when the gate fails."""
        assert self.monthly_usd is not None
        return (
            f"{where}: budget.monthly_usd: the estimate at {self.enforce} capacity, {usd(self.totals[self.enforce])} a month, "
            f"exceeds the budget of {usd(self.monthly_usd)} (min {usd(self.totals['min'])}, desired "
            f"{usd(self.totals['desired'])}, max {usd(self.totals['max'])}; pools and fixed charges); lower the sizes or "
            f"raise budget.monthly_usd (budget.enforce: {self.enforce})"
        )


def budget_check(env: Any, table: PriceTable | None = None) -> BudgetCheck:
    """Price one environment (pools and fixed charges) at every level; :class:`MissingPriceError` if it cannot."""
    from neuronkit.reports.pools import pools_from_environment

    table = table or pricing.load_prices()
    costs = price_pools(pools_from_environment(env), table)
    charges = fixed_costs(env, table)
    fixed = sum(f.monthly for f in charges)
    totals = {level: sum(c.monthly(level) for c in costs) + fixed for level in LEVELS}
    budget = env.budget
    return BudgetCheck(
        environment=env.name,
        monthly_usd=None if budget is None else float(budget.monthly_usd),
        enforce="off" if budget is None else budget.enforce,
        totals=totals,
        fixed=tuple(charges),
    )


def budget_problems(envs: Sequence[Any], where: dict[str, str] | None = None, table: PriceTable | None = None) -> list[str]:
    """The gate's findings, one line per environment over its enforced budget (``where``: name -> file shown)."""
    where = where or {}
    out: list[str] = []
    for e in envs:
        if e.budget is None or e.budget.enforce == "off":
            continue
        shown = where.get(e.name, f"environments/{e.name}.yaml")
        try:
            check = budget_check(e, table)
        except MissingPriceError as err:
            first = err.problems[0] if err.problems else str(err)
            out.append(
                f"{shown}: budget.enforce: the environment cannot be priced ({first}); price it or set budget.enforce: off"
            )
            continue
        if check.over:
            out.append(check.problem(shown))
    return out


def environment_report(envs: Sequence[Any], fmt: str = "text", table: PriceTable | None = None) -> str:
    """The pools' report, then per environment what else it costs and the total against its budget."""
    table = table or pricing.load_prices()
    from neuronkit.reports.pools import pools_from_environment

    text = cost_report([p for e in envs for p in pools_from_environment(e)], fmt, table)
    costs = price_pools([p for e in envs for p in pools_from_environment(e)], table)
    doc = _Doc()
    doc.heading(2, "Besides the pools, and the budget")
    sp = _service_prices()
    doc.para(
        f"Fixed monthly charges of what the stacks create, at list prices from catalog/service_prices.yaml (as of "
        f"{sp['as_of']}); traffic-based charges (GB processed, LCUs, S3, CloudWatch, data transfer) are not estimated."
    )
    for e in envs:
        fixed = fixed_costs(e, table)
        mine = [c for c in costs if c.pool.environment == e.name]
        other = sum(f.monthly for f in fixed)
        rows = [[f.item, usd(f.monthly), f.basis] for f in fixed]
        pools_at = {level: sum(c.monthly(level) for c in mine) for level in LEVELS}
        rows.append(["pools at min / desired / max", " / ".join(usd(pools_at[lv]) for lv in LEVELS), "the tables above"])
        rows.append(["total at min / desired / max", " / ".join(usd(pools_at[lv] + other) for lv in LEVELS), ""])
        doc.heading(3, f"{e.name} ({e.region})")
        doc.table(["item", "$/month", "basis"], rows, "lrl")
        check = BudgetCheck(
            environment=e.name,
            monthly_usd=None if e.budget is None else float(e.budget.monthly_usd),
            enforce="off" if e.budget is None else e.budget.enforce,
            totals={level: pools_at[level] + other for level in LEVELS},
        )
        doc.para(check.verdict())
    return text + "\n" + doc.render(fmt)
