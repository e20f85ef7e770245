"""The simulator: kube-scheduler's placement, autoscalers' provisioning and the cost of both."""
