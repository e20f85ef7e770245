"""The only layer that talks to a cluster: kubeconfig, list/watch, create/delete, logs, snapshot."""
