"""python -m bench.serving"""

from bench.serving.cli import main

main()
