"""``python -m atoll_cli``: the ``atoll`` command without the console script."""

from atoll_cli.cli import main

if __name__ == "__main__":  # importing this module (a package walk) runs nothing
    main()
