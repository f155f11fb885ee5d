"""Browser tests: small apps built from the kit, driven in Chromium with Playwright."""
