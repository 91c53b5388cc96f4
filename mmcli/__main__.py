"""``python -m mmcli``: the same entry point as the ``mmcli`` script."""

from mmcli.cli.main import main

if __name__ == "__main__":
    main()
