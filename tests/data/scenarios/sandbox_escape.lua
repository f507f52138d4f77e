-- Fixture: scenario files run without os/io.
os.execute("touch /tmp/memsim-sandbox-escape")
return {}
