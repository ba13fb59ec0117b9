"""py_script_test: a Python test script run by one shared runner (run_py_test.sh).

The script is tests/<name>.py; it finds the tools it checks through ZEROPP_RUNFILES, the
workspace's runfiles directory, which the runner exports. sh_test rather than py_test: the tests
run the system python3, as `./zpp` and the tools do, with no Python toolchain to configure.
"""

def py_script_test(name, data = [], **kwargs):
    native.sh_test(
        name = name,
        srcs = ["run_py_test.sh"],
        args = ["$(location %s.py)" % name],
        data = [name + ".py"] + data,
        **kwargs
    )
