"""The Desk's Redis RPC (its wire format: btu/shared/protocol.py): `listener.py` takes commands off the list and
replies; `dispatcher.py` carries them out."""
