# pytest collects the example tests here, not the apps (importing an app runs it).
collect_ignore = ["express_app.py", "dashboard.py", "custom_write_tool.py"]
