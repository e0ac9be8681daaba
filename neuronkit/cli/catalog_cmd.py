"""``neuronkit catalog show|refresh``: read or regenerate the instance catalog from EC2 (or, with
``refresh --prices``, the On-Demand price table from the AWS Price List API)."""

from __future__ import annotations

import argparse

from neuronkit import catalog
from neuronkit.catalog import pricing, refresh
from neuronkit.cli.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("catalog", help="show or refresh the instance catalog")
    csub = p.add_subparsers(dest="catalog_command", required=True, metavar="ACTION")
    show = csub.add_parser("show", help="print the catalog's accelerator types, or one type's facts and AZ IDs")
    show.add_argument("instance_type", nargs="?", metavar="TYPE", help="one type, e.g. trn2.48xlarge: every fact and its AZ IDs")
    show.add_argument(
        "--region",
        metavar="R",
        action="append",
        default=None,
        help="only types offered in this region (with TYPE: only its AZ IDs there); repeat for more",
    )
    show.set_defaults(func=show_catalog)
    r = csub.add_parser("refresh", help="regenerate instances.json from an EC2 endpoint (uses your AWS credentials)")
    r.add_argument(
        "--region",
        metavar="R",
        action="append",
        default=None,
        help="a region to scan; repeat for more (default: every Trainium/Inferentia region; with --prices, the regions "
        "of prices.json)",
    )
    r.add_argument(
        "--endpoint-url", metavar="URL", default=None, help="EC2 (or, with --prices, Price List API) endpoint, e.g. a moto server"
    )
    r.add_argument(
        "--prices",
        action="store_true",
        help="refresh prices.json from the AWS Price List API (pricing:GetProducts) instead of instances.json",
    )
    r.add_argument(
        "--images",
        action="store_true",
        help="refresh published_images.json (the tags of every repository the kit pins from) from ECR Public; no credentials",
    )
    r.add_argument("--source", metavar="TEXT", default="", help="text recorded as the catalog's source")
    r.set_defaults(func=refresh_catalog)


def show_catalog(args: argparse.Namespace) -> int:
    meta = catalog.metadata()
    types = catalog.instance_types()
    regions = list(dict.fromkeys(getattr(args, "region", None) or []))
    for region in regions:
        if region not in meta["regions"]:
            raise CliError(f"--region {region}: the catalog scanned {', '.join(meta['regions'])}; refresh it with that region")
    if getattr(args, "instance_type", None):
        return _show_one(args.instance_type, regions)
    print(f"source: {meta['source']} ({meta['generated']})")
    print(f"{'type':<16} {'accel':<10} {'vCPU':>5} {'chips':>5} {'cores':>5} {'GPUs':>4} {'EFA':>4} {'Gbps':>6}")
    for name, t in types.items():
        if regions and not any(t.az_ids(r) for r in regions):
            continue
        chips = t.neuron_devices
        print(
            f"{name:<16} {t.accelerator:<10} {t.vcpus:>5} {chips:>5} {t.neuron_cores:>5} {t.gpus:>4} "
            f"{t.efa_max_interfaces:>4} {t.efa_bandwidth_gbps:>6.0f}"
        )
    return 0


def _show_one(name: str, regions: list[str]) -> int:
    t = catalog.instance_types().get(name)
    if t is None:
        close = [n for n in catalog.instance_types() if n.split(".")[0] == name.split(".")[0]]
        hint = f"; the catalog has {', '.join(close)}" if close else "; `neuronkit catalog show` lists every type"
        raise CliError(f"{name} is not in the instance catalog{hint}")
    memory = f"{t.neuron_memory_mib // 1024} GiB HBM" if t.is_neuron else f"{t.gpu_memory_mib // 1024} GiB GPU memory"
    devices = (
        f"{t.neuron_devices} x {t.neuron_device_name}, {t.neuron_cores} NeuronCores"
        if t.is_neuron
        else f"{t.gpus} x {t.gpu_model}"
    )
    print(f"{name}: {t.accelerator}, {devices}, {memory}")
    print(f"  host: {t.vcpus} vCPU, {t.memory_mib // 1024} GiB, {t.architecture}")
    efa = f"{t.efa_max_interfaces} EFA interfaces, {t.efa_bandwidth_gbps:g} Gbps" if t.efa_supported else "no EFA"
    print(f"  network: {t.network_cards} network card(s), {efa}; placement: {', '.join(t.placement_strategies) or 'none'}")
    for r in regions or sorted(t.offerings):
        print(f"  {r}: {', '.join(t.az_ids(r)) or 'not offered'}")
    return 0


def refresh_catalog(args: argparse.Namespace) -> int:
    if args.images:
        from neuronkit.catalog import images

        doc = images.refresh()
        unknown = images.missing()
        print(f"wrote {images.RECORD} ({len(doc['repositories'])} repositories, checked {doc['checked']})")
        for image in unknown:
            print(f"not published: {image}")
        return 1 if unknown else 0
    import boto3

    session = boto3.Session()
    if args.endpoint_url:
        real_client = session.client

        def client(service: str, **kw: object) -> object:
            return real_client(service, endpoint_url=args.endpoint_url, **kw)  # type: ignore[call-overload]

        session.client = client  # type: ignore[method-assign]
    if args.prices:
        return _refresh_prices(args, session)
    regions = tuple(dict.fromkeys(args.region or refresh.DEFAULT_REGIONS))
    doc = refresh.build(session, regions, source=args.source or f"EC2 at {args.endpoint_url or 'AWS'}")
    refresh.write(doc)
    print(f"wrote {refresh.CATALOG_FILE} ({len(doc['instance_types'])} instance types, {len(doc['regions'])} regions)")
    return 0


def _refresh_prices(args: argparse.Namespace, session: object) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    regions = list(dict.fromkeys(args.region or pricing.load_prices().regions))
    types = list(catalog.instance_types())
    try:
        doc = pricing.refresh_prices(session, regions, types, source=args.source)
    except (BotoCoreError, ClientError) as err:
        raise CliError(f"cannot read the AWS Price List API ({err}); it needs credentials allowed pricing:GetProducts") from None
    except pricing.PricingError as err:
        raise CliError(str(err)) from None
    pricing.write_prices(doc, pricing.PRICES_FILE)
    priced = sum(len(p) for p in doc["prices"].values())
    print(
        f"wrote {pricing.shown_path(pricing.PRICES_FILE)} ({priced} prices in {len(regions)} regions, "
        f"as of {doc['as_of']}; {len(doc['unpriced'])} types without an On-Demand price)"
    )
    return 0
