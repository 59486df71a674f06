"""Entry point for `python -m kcontract`."""

from kcontract.cli import main

if __name__ == "__main__":
    main()
