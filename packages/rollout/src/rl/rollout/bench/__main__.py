"""`python -m rl.rollout.bench [options]`: the engines benchmark (see `engines`)."""

from rl.rollout.bench.engines import main

if __name__ == "__main__":
    main()
