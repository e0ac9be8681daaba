"""``neuronkit catalog show|refresh``: read or regenerate the instance catalog from EC2."""

from __future__ import annotations

import argparse

from neuronkit import catalog
from neuronkit.catalog import refresh


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("catalog", help="show or refresh the instance catalog")
    csub = p.add_subparsers(dest="catalog_command", required=True)
    show = csub.add_parser("show", help="print the catalog's accelerator types")
    show.set_defaults(func=show_catalog)
    r = csub.add_parser("refresh", help="regenerate instances.json from an EC2 endpoint (uses your AWS credentials)")
    r.add_argument("--regions", nargs="+", default=list(refresh.DEFAULT_REGIONS))
    r.add_argument("--endpoint-url", default=None, help="EC2 endpoint (e.g. a moto server)")
    r.add_argument("--source", default="", help="text recorded as the catalog's source")
    r.set_defaults(func=refresh_catalog)


def show_catalog(args: argparse.Namespace) -> int:
    meta = catalog.metadata()
    print(f"source: {meta['source']} ({meta['generated']})")
    print(f"{'type':<16} {'accel':<10} {'vCPU':>5} {'chips':>5} {'cores':>5} {'GPUs':>4} {'EFA':>4} {'Gbps':>6}")
    for name, t in catalog.instance_types().items():
        chips = t.neuron_devices
        print(f"{name:<16} {t.accelerator:<10} {t.vcpus:>5} {chips:>5} {t.neuron_cores:>5} {t.gpus:>4} {t.efa_max_interfaces:>4} {t.efa_bandwidth_gbps:>6.0f}")
    return 0


def refresh_catalog(args: argparse.Namespace) -> int:
    import boto3

    session = boto3.Session()
    if args.endpoint_url:
        real_client = session.client

        def client(service: str, **kw: object) -> object:
            return real_client(service, endpoint_url=args.endpoint_url, **kw)  # type: ignore[call-overload]

        session.client = client  # type: ignore[method-assign]
    doc = refresh.build(session, tuple(args.regions), source=args.source or f"EC2 at {args.endpoint_url or 'AWS'}")
    refresh.write(doc)
    print(f"wrote {refresh.CATALOG_FILE} ({len(doc['instance_types'])} instance types, {len(doc['regions'])} regions)")
    return 0
