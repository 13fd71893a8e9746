"""lerobot-policy-server: one pre-warmed model served to many robots over Zenoh."""
