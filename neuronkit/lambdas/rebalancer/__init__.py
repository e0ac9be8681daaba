"""The inference fleet rebalancer (see handler.py)."""
