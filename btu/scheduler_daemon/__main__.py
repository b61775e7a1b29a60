from btu.scheduler_daemon.cli import main

raise SystemExit(main())
