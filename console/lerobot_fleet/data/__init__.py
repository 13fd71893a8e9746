"""The fleet's data path, shared by the console and the verbs: sources write into a store, snapshots derive rows."""
