"""rmqtool: run and dissect Apache RocketMQ 5.x stores, byte-compatible with the Java broker."""

__version__ = "0.1.0"
