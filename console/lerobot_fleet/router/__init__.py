"""The embedded Zenoh router and its security: ACL from the inventory, PKI, refusal log and board."""
