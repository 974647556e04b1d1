"""The dashboard's page in a real headless chromium (Debian's chromium + chromium-driver), as a
person sees it: the job graph is drawn, and a vertex turns from ok to high back pressure when
the job's reader stops. `make test-all` installs the browser; `make test` does not run this."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "the browser test needs Debian's chromium and chromium-driver: `make test-all` installs them "
        "(apt-get install chromium chromium-driver)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium'}"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_draws_the_graph_and_colours_back_pressure(
    browser: object, running_job: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver: object = browser
    driver.get(running_job.url)  # type: ignore[attr-defined]
    wait = WebDriverWait(driver, 90)  # type: ignore[arg-type]

    def boxes(d: object) -> dict[str, tuple[str, str]]:
        """vertex name -> (back-pressure level, the box's computed fill colour), read in one go
        (the page redraws every second)."""
        rows = d.execute_script(  # type: ignore[attr-defined]
            "return Array.from(document.querySelectorAll('svg#graph g.vertex')).map(g => ["
            "g.querySelector('text.name').textContent, g.getAttribute('data-backpressure'),"
            "getComputedStyle(g.querySelector('rect')).fill])"
        )
        return {name: (level, fill) for name, level, fill in rows}

    def text_of(d: object, selector: str) -> str:
        return str(d.execute_script(f"return document.querySelector('{selector}').textContent"))  # type: ignore[attr-defined]

    # the graph is drawn: one box per vertex, with its name, parallelism and records, and edges
    drawn = wait.until(lambda d: (b := boxes(d)) and len(b) == 3 and b)
    assert set(drawn) == {"Source: numbers", "double", "Sink: Collect Stream Sink"}
    texts = text_of(driver, "svg#graph")
    assert "parallelism 2" in texts and "parallelism 1" in texts and "in " in texts and "out " in texts
    edges = driver.execute_script("return document.querySelectorAll('svg#graph path.edge').length")  # type: ignore[attr-defined]
    assert edges == 2
    wait.until(lambda d: boxes(d)["Source: numbers"][0] == "ok")  # the source idles on its rate limit
    calm = boxes(driver)["Source: numbers"][1]
    assert "taskmanager-0" in text_of(driver, "#taskmanagers tbody")

    # the reader stops: the source fills every buffer and waits, and its box turns red
    (tmp_path / "hold").touch()
    wait.until(lambda d: boxes(d)["Source: numbers"][0] == "high")
    pressed = boxes(driver)["Source: numbers"][1]
    assert pressed != calm, (calm, pressed)
    wait.until(lambda d: "COMPLETED" in text_of(d, "#checkpoints tbody"))
    driver.save_screenshot(str(tmp_path / "dashboard.png"))  # type: ignore[attr-defined]
    if os.environ.get("WEIR_DASHBOARD_SCREENSHOT"):  # keep a copy to look at
        Path(os.environ["WEIR_DASHBOARD_SCREENSHOT"]).write_bytes((tmp_path / "dashboard.png").read_bytes())

    (tmp_path / "hold").unlink()
    status, stderr = running_job.interrupt()
    assert status == 0, stderr
