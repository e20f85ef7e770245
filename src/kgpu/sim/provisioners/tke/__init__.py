"""Tencent TKE super nodes: each GPU pod buys its own spec (``spec``) on a virtual node (``supernode``)."""
