"""rl-core: config, data, algorithms, rewards, the controller, placement and the engine registry."""

__version__ = "0.1.0"
