"""The Textual operator console: the app, its screens, renderers and widgets over the store's snapshots."""
