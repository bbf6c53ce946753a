"""A fake inference server process: it answers signals like a real one, for adoption tests."""

FAKE_SERVER = r'''
import os, signal, subprocess, sys, time
def bye(signum, frame):
    print(f"stopping on signal {signum}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, bye)
signal.signal(signal.SIGTERM, bye)
if "--spawn-child" in sys.argv:
    argv = [a for a in sys.argv[1:] if a != "--spawn-child"]
    child = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *argv])
    print(f"child {child.pid}", flush=True)
print("The server is fired up and ready to roll!", sys.argv[1:], flush=True)
print("Application startup complete.", flush=True)
while True:
    time.sleep(0.05)
'''
