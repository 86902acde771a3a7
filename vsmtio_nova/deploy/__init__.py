"""Deployment helpers shared by the devstack plugin and the test cloud."""
