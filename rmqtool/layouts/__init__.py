"""Binary layouts of every RocketMQ store file: construct declarations, the single truth.

Hot-path `struct` twins live next to their declaration and are tested against it.
"""
