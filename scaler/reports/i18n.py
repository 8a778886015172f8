"""Strings of the reports and the finance dry-run, in English (default) and Russian.

Every label, heading and explanation a person reads in a report goes through
:func:`t`, so a language is one more column of :data:`TEXTS`. Each key holds its
string in every language side by side, grouped by the key's prefix (``sec_`` for a
section heading, ``col_`` for a column, ``chart_`` for a chart, ...) and sorted by
key within a group, so a string is found by its key and its translation is read
beside it. The ``{placeholders}`` of a key are the same in every language; a test
checks both that and that no key is missing. Numbers are formatted per language by
:func:`fmt_number` (``1,234.50`` in English, ``1 234,50`` in Russian), month names
by :func:`month_label`; neither depends on the machine's locale, so a report reads
the same wherever it is made. The planner's reasons and typed notes are values,
rendered from their codes by :mod:`scaler.wording`'s own table per language.

Why a table and not gettext
---------------------------
* What is translated: about 250 strings, read only in the reports and the finance
  dry-run's terminal output, in two languages; logs and error messages stay English.
  Parameters are named ``str.format`` fields filled after the lookup, which gettext
  would do the same way, so it would not change how a string is written.
* What gettext would add: a ``.po`` file per language and a compile step to ``.mo``
  (``msgfmt`` or Babel's ``compile_catalog``) before the package works, the ``.mo``
  files as package data, and a CI check that they match the ``.po`` sources. The
  table needs none of these: it is Python, checked by the test suite like the code.
* Plural forms (``ngettext``, three in Russian) are what gettext has that the table
  lacks. The strings avoid them (``node(s)``, ``calendar months: {months}``), and
  adopting them would change the text of today's reports.
* The planner's reasons are values with a code and parameters
  (:class:`scaler.wording.Reason`), rendered from a format string per code and
  language, as a catalog would render a message with named fields.
* Babel for numbers and dates (its CLDR data is about 33 MB installed) would change
  what reports print: it rounds the decimal text of a float (2.675 gives ``2.68``
  where ``f"{2.675:.2f}"`` gives ``2.67``), keeps the sign of a rounded zero
  (``-0.00``), prints NaN as ``NaN`` where the reports print ``–``, and abbreviates
  Russian months as ``февр.``, ``сент.`` where the reports print ``фев``, ``сен``.
  The group separator it uses for Russian (U+00A0) is the one :func:`fmt_number` uses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from forecaster.errors import BadInputError
from scaler.wording import term

LANGS: tuple[str, ...] = ("en", "ru")
DEFAULT_LANG = "en"


def check_lang(lang: str) -> str:
    """Validate a ``--lang`` value; one line naming what is supported."""
    key = str(lang).strip().lower()
    if key not in STRINGS:
        raise BadInputError(
            f"--lang: {lang!r} is not supported; expected one of {', '.join(LANGS)}"
        )
    return key


def t(lang: str, key: str, **params: Any) -> str:
    """The string ``key`` in ``lang`` with ``params`` filled in (English when a key is missing)."""
    table = STRINGS.get(lang, STRINGS[DEFAULT_LANG])
    text = table.get(key, STRINGS[DEFAULT_LANG].get(key))
    if text is None:
        raise KeyError(f"no string {key!r} in language {lang!r}")
    return text.format(**params) if params else text


def fmt_number(value: float, lang: str, digits: int = 2) -> str:
    """``1234.5 -> '1,234.50'`` (en) or ``'1 234,50'`` (ru, no-break space); '–' for NaN."""
    x = float(value)
    if not math.isfinite(x):
        return "–"
    if digits == 0 or abs(round(x, digits)) == 0.0:
        x = x + 0.0  # turn -0.0 into 0.0 so a zero never prints with a sign
    text = f"{x:,.{digits}f}"
    if text.lstrip("-").strip("0.,") == "":
        text = text.lstrip("-")
    if lang == "ru":
        text = text.replace(",", "\u00a0").replace(".", ",")
    return text


def month_label(period: str, lang: str) -> str:
    """``'2027-01' -> 'Jan 2027'`` (en) or ``'янв 2027'`` (ru)."""
    year, _, month = str(period).partition("-")
    try:
        name = _MONTHS.get(lang, _MONTHS[DEFAULT_LANG])[int(month) - 1]
    except (ValueError, IndexError):
        return str(period)
    return f"{name} {year}"


def render_note(key: str, params: Mapping[str, Any], lang: str) -> str:
    """A projection note (``Note.key`` and its parameters) as a sentence."""
    return t(lang, "note_" + key, **params)


def numbers_in(text: str, lang: str) -> list[float]:
    """Every number in ``text`` as written in ``lang`` (``1,234.5`` in English, ``1 234,5`` in Russian)."""
    # Quantile labels (q0.9) and names with dots (1g.10gb) read the same in every language.
    text = re.sub(r"(?<=[A-Za-z])\.(?=\d)", " ", re.sub(r"\bq(\d+)\.(\d+)", r"q\1 \2", text))
    if lang == "ru":
        text = text.replace("\u00a0", "")
        found = re.findall(r"\d+(?:,\d+)?", text)
        return [float(x.replace(",", ".")) for x in found]
    found = re.findall(r"\d[\d,]*(?:\.\d+)?", text)
    return [float(x.replace(",", "")) for x in found if x.replace(",", "")]


# ---------------------------------------------------------------- the strings

_MONTHS: dict[str, tuple[str, ...]] = {
    "en": ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
    "ru": ("янв", "фев", "мар", "апр", "май", "июн", "июл", "авг", "сен", "окт", "ноя", "дек"),
}
"""Abbreviated month names, January first."""

TEXTS: dict[str, dict[str, str]] = {
    # The page: titles, subtitles, the footer and words used everywhere.
    "baseline": {"en": "baseline", "ru": "базовый"},
    "empty": {"en": "(none)", "ru": "(нет)"},
    "footer": {
        "en": "Generated by tiercast {version}. All times UTC. Costs in the currency of the configured prices.",
        "ru": "Сформировано tiercast {version}. Время везде UTC. Стоимость в валюте цен из конфигурации.",
    },
    "no": {"en": "no", "ru": "нет"},
    "subtitle_finance": {
        "en": "Source: {source}. Projection from {start} to {end} UTC ({months} calendar month(s)). tiercast {version}.",
        "ru": "Источник: {source}. Прогноз с {start} по {end} UTC (календарных месяцев: {months}). tiercast {version}.",
    },
    "subtitle_report": {
        "en": "Source: {source}. Planned at {created} for {hours} h ahead, capacity sized to forecast quantile {q}. tiercast {version}.",
        "ru": "Источник: {source}. План составлен {created} на {hours} ч вперёд; мощность рассчитана по квантилю прогноза {q}. tiercast {version}.",
    },
    "title_finance": {
        "en": "GPU capacity finance dry-run",
        "ru": "Финансовый прогноз мощностей GPU (без изменений в кластере)",
    },
    "title_report": {"en": "GPU capacity review", "ru": "Обзор мощностей GPU"},
    "yes": {"en": "yes", "ru": "да"},
    # Key figures (fig_) and their units (unit_).
    "fig_changes": {"en": "Capacity changes", "ru": "Изменений мощности"},
    "fig_commit_saving": {
        "en": "Commitment advice saves per month",
        "ru": "Экономия по совету о резервировании в месяц",
    },
    "fig_cost_band": {
        "en": "Cost over the horizon, {band}",
        "ru": "Стоимость за горизонт, вариант «{band}»",
    },
    "fig_cost_horizon": {
        "en": "Planned cost over {hours} h",
        "ru": "Плановая стоимость за {hours} ч",
    },
    "fig_cost_now": {"en": "Spend now", "ru": "Расходы сейчас"},
    "fig_cost_per_month": {
        "en": "Average cost per month (expected)",
        "ru": "Средняя стоимость в месяц (ожидаемая)",
    },
    "fig_cost_planned": {"en": "Spend after this cycle", "ru": "Расходы после этого цикла"},
    "fig_energy_cost": {
        "en": "Energy cost (expected, beside the cost)",
        "ru": "Стоимость электроэнергии (ожидаемая, сверх стоимости)",
    },
    "fig_gpu_hours": {"en": "GPU-hours paid (expected)", "ru": "Оплаченные GPU-часы (ожидаемые)"},
    "fig_horizon_days": {"en": "Projection horizon", "ru": "Горизонт прогноза"},
    "fig_idle": {
        "en": "Idle capacity (vs median demand)",
        "ru": "Простой мощности (к медианному спросу)",
    },
    "fig_plan_short": {
        "en": "Demand the plan leaves short ({q})",
        "ru": "Спрос {q} без мощности в плане",
    },
    "fig_solver_fallback": {
        "en": "GPU models planned by the greedy fallback",
        "ru": "Моделей GPU по запасному жадному плану",
    },
    "fig_idle_reserved": {
        "en": "Idle reserved capacity (expected)",
        "ru": "Простой резерва (ожидаемый)",
    },
    "fig_idle_reserved_cost": {
        "en": "Cost of idle reserved capacity (expected)",
        "ru": "Стоимость простоя резерва (ожидаемая)",
    },
    "fig_unserved": {"en": "Expected unserved demand", "ru": "Ожидаемый необслуженный спрос"},
    "fig_utilization": {"en": "Utilization (median demand)", "ru": "Загрузка (медианный спрос)"},
    "unit_days": {"en": "days", "ru": "дн."},
    "unit_gpu_hours": {"en": "GPU-h", "ru": "GPU-ч"},
    "unit_per_hour": {"en": "/h", "ru": "/ч"},
    # The summary's recommendations (summary_).
    "summary_finance_short": {
        "en": "{model}: {short} GPU-h of the high forecast cannot be served by any pool (max_nodes); the costs above leave them out.",
        "ru": "{model}: {short} GPU-ч высокого прогноза не может обслужить ни один пул (max_nodes); в стоимости выше их нет.",
    },
    "summary_hindsight": {
        "en": "Over the review period, {short} GPU-h of demand went unserved (cost {short_cost}) and {idle} GPU-h were idle (cost {idle_cost}).",
        "ru": "За период обзора не обслужено {short} GPU-ч спроса (стоимость {short_cost}), простаивало {idle} GPU-ч (стоимость {idle_cost}).",
    },
    "summary_lead_coverage": {
        "en": "{signal}: the {low}–{high} band covered {coverage}% of actuals at lead day {day} of the plan's horizon against {nominal}% nominal ({off} of {scored} scored lead days more than 10 points off): {why}.",
        "ru": "{signal}: полоса {low}–{high} накрыла {coverage}% фактических значений на {day}-й день упреждения горизонта плана при номинале {nominal}% (на {off} из {scored} оценённых дней отклонение больше 10 пунктов): {why}.",
    },
    "lead_flag_history": {
        "en": "those origins had {had} days of history, the plan's forecast {plan}, so the score is of a forecast made with less history than the plan's and may not carry over to it",
        "ru": "у этих точек отсчёта было {had} дн. истории, у прогноза плана — {plan}, так что оценён прогноз на более короткой истории, чем у плана, и оценка может к нему не относиться",
    },
    "lead_flag_narrow": {
        "en": "with about the plan's history the band is too narrow there, so demand falls outside the planned band more often than it says",
        "ru": "при истории, близкой к истории плана, полоса там слишком узка: спрос выходит за полосу плана чаще, чем она обещает",
    },
    "lead_flag_also": {
        "en": "; and at lead days {days}, {why}",
        "ru": "; а на днях упреждения {days} {why}",
    },
    "lead_flag_wide": {
        "en": "with about the plan's history the band is wider than the demand's spread there, so the plan's high case holds more capacity than the band's nominal share needs",
        "ru": "при истории, близкой к истории плана, полоса там шире разброса спроса, и верхний сценарий плана держит больше мощности, чем нужно для номинальной доли",
    },
    "summary_lost_to_baseline": {
        "en": "The forecast of {signal} lost to {baseline} in the backtest (MASE {mase} against {base_mase}).",
        "ru": "Прогноз {signal} в бэктесте проиграл {baseline} (MASE {mase} против {base_mase}).",
    },
    "summary_max_nodes": {
        "en": "{pool} reaches its max_nodes ({max}) at {at}; demand above it goes to dearer pools.",
        "ru": "{pool} достигает max_nodes ({max}) в {at}; спрос сверх этого уходит в более дорогие пулы.",
    },
    "summary_max_nodes_short": {
        "en": "{pool} is held at its max_nodes ({max}) at {at} with every other pool of its GPU model full: demand beyond it goes unserved; raise max_nodes or add a pool.",
        "ru": "{pool} упирается в max_nodes ({max}) в {at}, и остальные пулы этой модели GPU заполнены: спрос сверх этого не обслуживается; увеличьте max_nodes или добавьте пул.",
    },
    "summary_nothing": {
        "en": "Nothing needs attention: no pool is held at its max_nodes, every forecast beat the baselines and the commitments stand.",
        "ru": "Ничего не требует внимания: ни один пул не упирается в max_nodes, все прогнозы лучше базовых, резерв менять не нужно.",
    },
    "summary_plan_short": {
        "en": "{model}: the plan leaves {gpu_hours} GPU-h of {q} demand short over the horizon (up to {gpus} GPUs short from {at}; bound: {because}); the cost figures leave that demand out.",
        "ru": "{model}: план оставляет {gpu_hours} GPU-ч спроса {q} за горизонт без мощности (не хватает до {gpus} GPU с {at}; ограничение: {because}); в стоимости этот спрос не учтён.",
    },
    "summary_reserved_idle": {
        "en": "{model}: reserved capacity ({pools}) is {share}% idle in the expected case, above {threshold}%: {idle} of {reserved} committed GPU-h go unused over the horizon, costing {cost}.",
        "ru": "{model}: резерв ({pools}) простаивает на {share}% в ожидаемом случае, больше {threshold}%: {idle} из {reserved} зарезервированных GPU-ч за горизонт не используются, стоимость {cost}.",
    },
    "summary_solver_fallback": {
        "en": "{model}: the optimizer gave no plan in its limits (time or search), so the greedy allocator planned it: capacity may cost more than the least-cost plan and the figures rest on that fallback.",
        "ru": "{model}: оптимизатор не нашёл план в своих пределах (по времени или поиску), поэтому план построил жадный алгоритм: мощность может стоить дороже наименьшей, и все показатели опираются на этот запасной план.",
    },
    "summary_scenario": {
        "en": "Scenario {scenario} changes the cost by {expected}% in the expected case and {high}% in the high case.",
        "ru": "Сценарий {scenario} меняет стоимость на {expected}% в ожидаемом случае и на {high}% при высоком спросе.",
    },
    # Section headings (sec_) and the paragraphs of sections (accuracy_, hindsight_, mig_,
    # notes_, currency_, unserved_).
    "accuracy_none": {
        "en": "No backtest could be run (history too short, or backtests turned off).",
        "ru": "Бэктест не выполнен (история слишком коротка или бэктест отключён).",
    },
    "accuracy_skipped": {"en": "Not backtested: {what}.", "ru": "Без бэктеста: {what}."},
    "lead_accuracy_intro": {
        "en": "At the plan's horizon ({days} days): the forecaster in use (past a week, with the long-horizon rule, as the plan's forecast) is refitted at origins a day apart, each with at least a week of history before it, and scored per lead day at the newest {n} origins with that day of actuals after them: MASE of the median (as above) and the share of actual values inside the {low}–{high} band. An origin sees only the history before it, so a later lead day is scored on less history than the plan's forecast had; each row says how much.",
        "ru": "На горизонте плана ({days} дн.): используемый прогноз (после первой недели — с правилом длинного горизонта, как в прогнозе плана) заново обучается в точках отсчёта с шагом в сутки, до каждой из которых не меньше недели истории, и каждый день упреждения оценивается в {n} самых поздних точках, после которых есть факт за этот день: MASE медианы (как выше) и доля фактических значений внутри полосы {low}–{high}. Точка отсчёта видит только историю до себя, поэтому дальние дни упреждения оцениваются на более короткой истории, чем у прогноза плана; в каждой строке указано, на какой.",
    },
    "lead_accuracy_none": {
        "en": "{signal}: no backtest {days} days ahead, nor at any lead day, is possible: the history holds {have} days and the backtest needs a week of history before its origins and a day of actuals after them ({need} days or more); the one-day scores above are not the horizon's.",
        "ru": "{signal}: бэктест на {days} дн. вперёд и на любой день упреждения невозможен: в истории {have} дн., а бэктесту нужна неделя истории до точек отсчёта и сутки факта после них (не меньше {need} дн.); суточные оценки выше не относятся к горизонту плана.",
    },
    "lead_accuracy_off": {
        "en": "Backtests are off (--backtest-origins 0), so the accuracy at the plan's horizon of {days} days is not scored.",
        "ru": "Бэктест отключён (--backtest-origins 0), поэтому точность на горизонте плана в {days} дн. не оценена.",
    },
    "lead_accuracy_short": {
        "en": "{signal}: the history supports lead days up to {lead} of the {days} asked.",
        "ru": "{signal}: история позволяет оценить дни упреждения до {lead}-го из {days} запрошенных.",
    },
    "currency_named": {
        "en": "Costs are in {currency}, the currency of the prices in the configuration (finance.currency).",
        "ru": "Стоимость указана в {currency} — валюте цен из конфигурации (finance.currency).",
    },
    "currency_note": {
        "en": "Costs are in the currency of the prices in the configuration (price per GPU-hour per pool).",
        "ru": "Стоимость указана в валюте цен из конфигурации (цена GPU-часа для каждого пула).",
    },
    "currency_unnamed": {"en": "the config's currency", "ru": "валюте конфигурации"},
    "hindsight_intro_backtest": {
        "en": "No run records for this period, so from the backtest of {start} to {end} UTC: the estimator in use refitted at each daily origin and forecasting the next day; planned capacity is the planner's allocation of GPU demand at {q} (commitments fixed), without lead time or stabilization. Planned GPUs serve actual demand reserved first, then the cheapest pool; what is left is idle, demand beyond every pool is short.",
        "ru": "Записей о запусках за период нет, поэтому по бэктесту с {start} по {end} UTC: используемая модель переобучена в каждой суточной точке и прогнозирует следующие сутки; плановая мощность — распределение планировщиком спроса на GPU по {q} (резерв фиксирован), без времени подготовки и стабилизации. Плановые GPU обслуживают фактический спрос: сначала резерв, затем самый дешёвый пул; остаток простаивает, спрос сверх всех пулов не обслужен.",
    },
    "hindsight_intro_records": {
        "en": "From the run records of {start} to {end} UTC: for each cycle, what it forecast one lead time ahead and the capacity its plan targeted for that moment (sized to {q}), against what the history shows happened. Planned GPUs serve actual demand reserved first, then the cheapest pool; what is left is idle, demand beyond every pool is short.",
        "ru": "По записям о запусках с {start} по {end} UTC: для каждого цикла — прогноз на время подготовки вперёд и мощность, которую его план назначил на этот момент (по {q}), против того, что показывает история. Плановые GPU обслуживают фактический спрос: сначала резерв, затем самый дешёвый пул; остаток простаивает, спрос сверх всех пулов не обслужен.",
    },
    "hindsight_drift": {
        "en": "Forecast drift: the model of signal '{signal}' was refitted ahead of schedule at {at} UTC ({band} covered {coverage}% of actuals, the median was off by {error}% of the mean actual, over {points} forecasts one lead time ahead).",
        "ru": "Дрейф прогноза: модель сигнала '{signal}' переобучена досрочно в {at} UTC ({band} охватил {coverage}% фактических значений, медиана отклонилась на {error}% от среднего факта, по {points} прогнозам на время подготовки вперёд).",
    },
    "hindsight_waited": {
        "en": "GPU demand waited for capacity (pods Pending over {threshold} s, Kueue workloads): {hours} GPU-hours ({models}), at most {peak} GPUs at once, in {cycles} cycle(s); each plan counted it as demand (what runs plus what waits).",
        "ru": "Спрос на GPU ждал мощности (поды в Pending дольше {threshold} с, задания Kueue): {hours} GPU-часов ({models}), не более {peak} GPU одновременно, в {cycles} цикл(ах); каждый план учитывал его как спрос (работающее плюс ожидающее).",
    },
    "hindsight_waited_none": {
        "en": "No GPU pod or Kueue workload waited over {threshold} s for capacity in the recorded cycles.",
        "ru": "Ни один под с GPU и ни одно задание Kueue не ждали мощности дольше {threshold} с в записанных циклах.",
    },
    "hindsight_none": {
        "en": "No forecast of the review period to compare: no run records and no backtest (history too short, or --backtest-origins 0).",
        "ru": "Сравнивать не с чем: нет записей о запусках и нет бэктеста (история слишком коротка или --backtest-origins 0).",
    },
    "hindsight_short_fallback": {
        "en": "Short GPU-hours are costed at the price of the pool that would have served them (the cheapest pool off commitment); set finance.unserved_price_per_gpu_hour to cost them as lost demand.",
        "ru": "Необслуженные GPU-часы оценены по цене пула, который должен был их обслужить (самого дешёвого пула вне резерва); задайте finance.unserved_price_per_gpu_hour, чтобы оценить их как потерянный спрос.",
    },
    "hindsight_short_priced": {
        "en": "Short GPU-hours are costed at {price} per GPU-hour (finance.unserved_price_per_gpu_hour).",
        "ru": "Необслуженные GPU-часы оценены по {price} за GPU-час (finance.unserved_price_per_gpu_hour).",
    },
    "mig_disagrees": {
        "en": "The MIG layouts cover {mig_nodes} node(s) of {pool} but the tier plan targets {target_now} now: the two sections do not come from the same plan.",
        "ru": "Разметка MIG покрывает {mig_nodes} узл. пула {pool}, а план типов сейчас требует {target_now}: разделы построены не по одному плану.",
    },
    "mig_use": {
        "en": "{model}: at the {q} peak {used} of the layouts' {instances} instances are in use ({occupancy}%), taking {peak_gpus} of the {gpus} GPUs' compute ({peak_compute}%); over the horizon they average {mean_occupancy}% of the instances and {mean_compute}% of the compute. The MIG chart shows the peak in instances, the utilization table the average compute at the median forecast, so the table reads lower: the layouts are cut for the peak, and the chart below shows both measures together.",
        "ru": "{model}: на пике {q} занято {used} из {instances} экземпляров разметки ({occupancy}%), и они занимают {peak_gpus} из {gpus} GPU по вычислительной мощности ({peak_compute}%); в среднем за горизонт занято {mean_occupancy}% экземпляров и {mean_compute}% вычислительной мощности. График MIG показывает пик в экземплярах, таблица загрузки — среднюю вычислительную загрузку при медианном прогнозе, поэтому в таблице меньше: разметка рассчитана на пик, а график ниже показывает обе меры вместе.",
    },
    "mig_grows": {
        "en": "The tier plan grows {pool} from {target_now} to {target_max} node(s) later in the horizon; the MIG layouts below cover the {mig_nodes} node(s) planned now, and nodes that join are laid out by the cycle that sees them.",
        "ru": "План типов увеличивает {pool} с {target_now} до {target_max} узл. позже в горизонте; разметка MIG ниже покрывает {mig_nodes} узл., запланированных сейчас, а новые узлы размечает цикл, который их увидит.",
    },
    "mig_intro": {
        "en": "MIG: instances needed per profile at the policy quantile against what the planned layouts provide; an instance-hour costs its compute share of the pool's GPU-hour price.",
        "ru": "MIG: число экземпляров каждого профиля, нужное на квантиле политики, против того, что дают плановые разметки; час экземпляра стоит его долю вычислительных ресурсов от цены GPU-часа пула.",
    },
    "notes_planner": {"en": "From the planner:", "ru": "От планировщика (на английском):"},
    "sec_accuracy": {
        "en": "Forecast accuracy against the baselines",
        "ru": "Точность прогноза в сравнении с базовыми моделями",
    },
    "sec_accuracy_intro": {
        "en": "Rolling-origin backtest over the last {n} days: each estimator is refitted on the data before each origin and scored on what followed. MASE is the mean absolute error of the median divided by that of 'same as yesterday' on the training data (below 1 is better than that baseline); pinball loss is scaled the same way; coverage is the share of actual values inside the {low}–{high} band (close to the band's width when the bands are honest).",
        "ru": "Бэктест со скользящей точкой отсчёта за последние {n} дн.: каждая модель заново обучается на данных до точки отсчёта и оценивается на том, что было после. MASE — средняя абсолютная ошибка медианы, делённая на ошибку прогноза «как вчера» на обучающих данных (меньше 1 — лучше этой базовой модели); pinball-потери нормированы так же; покрытие — доля фактических значений внутри полосы {low}–{high} (при честных полосах близка к её ширине).",
    },
    "sec_actions": {"en": "Actions and their reasons", "ru": "Действия и их причины"},
    "sec_actions_intro": {
        "en": "What the planner would do now, per pool. Nothing is applied by a report or a dry-run.",
        "ru": "Что планировщик сделал бы сейчас, по каждому пулу. Отчёт и пробный запуск ничего не применяют.",
    },
    "sec_capacity": {
        "en": "Capacity plan against forecast demand",
        "ru": "План мощности против прогноза спроса",
    },
    "sec_capacity_intro": {
        "en": "Planned GPUs per pool (stacked; spot counted net of expected reclamation) against GPU demand at the {q} quantile and at the median, per GPU model.",
        "ru": "Плановое число GPU по пулам (накоплением; спотовые — за вычетом ожидаемых отзывов) против спроса на GPU на квантиле {q} и по медиане, для каждой модели GPU.",
    },
    "sec_commitments": {"en": "Commitment advice", "ru": "Совет по резервированию"},
    "sec_commitments_intro": {
        "en": "Each commitment level (reserved nodes held, and for added nodes each priced term) is projected the same way as the baseline, with the other pools filled for what it leaves. {unserved_rule} A level qualifies when no case (low, expected, high) comes out worse than keeping the current commitment; the advice is the one that gains most in the expected case. Base load is the number of GPUs the low forecast needs in at least {coverage}% of hours. Break-even utilization is the reserved price over the on-demand price: a committed GPU pays off when it would otherwise be busy more than that share of hours.",
        "ru": "Каждый уровень резерва (число узлов, а для добавляемых узлов — каждый срок с ценой) рассчитан так же, как базовый прогноз; остальные пулы заполняются тем, что резерв оставляет. {unserved_rule} Уровень допустим, если ни в одном случае (низкий, ожидаемый, высокий спрос) он не хуже текущего резерва; совет — допустимый уровень с наибольшим выигрышем в ожидаемом случае. Базовая нагрузка — число GPU, нужное по низкому прогнозу не менее чем в {coverage}% часов. Точка безубыточности — отношение цены резерва к цене по запросу: зарезервированный GPU окупается, если иначе он был бы занят дольше этой доли часов.",
    },
    "sec_cost": {"en": "Cost by tier", "ru": "Стоимость по типам мощности"},
    "sec_cost_intro": {
        "en": "Planned spend by tier (reserved, on-demand, spot), per day and per calendar month of the plan's horizon, at the configured price per GPU-hour.",
        "ru": "Плановые расходы по типам (зарезервированные, по запросу, спотовые) за каждый день и календарный месяц горизонта плана по ценам GPU-часа из конфигурации.",
    },
    "sec_hindsight": {
        "en": "Forecast against actual over the review period",
        "ru": "Прогноз против факта за период обзора",
    },
    "sec_notes": {"en": "Notes", "ru": "Примечания"},
    "sec_projection": {
        "en": "Projection by tier and month",
        "ru": "Прогноз по типам мощности и месяцам",
    },
    "sec_projection_intro": {
        "en": "GPU-hours and cost per tier and calendar month if demand follows the low ({low}), expected (median) or high ({high}) forecast, with capacity filled the way the planner fills it (reserved first, then the cheapest tier that is safe).",
        "ru": "GPU-часы и стоимость по типам мощности и календарным месяцам, если спрос пойдёт по низкому ({low}), ожидаемому (медиана) или высокому ({high}) прогнозу; мощность заполняется так же, как это делает планировщик (сначала резерв, затем самый дешёвый безопасный тип).",
    },
    "sec_scenarios": {"en": "Scenarios side by side", "ru": "Сценарии рядом"},
    "sec_scenarios_intro": {
        "en": "Each scenario changes the inputs (traffic growth, an added workload, prices, spot interruption rate) and is projected the same way as the baseline.",
        "ru": "Каждый сценарий меняет входные данные (рост трафика, новая нагрузка, цены, частота отзыва спотовых узлов) и считается тем же способом, что и базовый.",
    },
    "sec_signals": {
        "en": "Demand signals: history and forecast",
        "ru": "Сигналы спроса: история и прогноз",
    },
    "sec_signals_intro": {
        "en": "Each chart shows the last days of history, the median forecast, the band between the {low} and {high} forecast quantiles, and the {q} quantile that capacity is sized to. The dotted line marks the newest sample.",
        "ru": "На каждом графике — последние дни истории, медианный прогноз, полоса между квантилями прогноза {low} и {high} и квантиль {q}, по которому рассчитывается мощность. Пунктир отмечает последнее измерение.",
    },
    "sec_summary": {"en": "What matters", "ru": "Главное"},
    "sec_utilization": {"en": "Utilization and waste", "ru": "Загрузка и потери"},
    "sec_utilization_intro": {
        "en": "Idle GPU-hours are planned capacity above median demand; short GPU-hours are demand above planned capacity, at the median and at the {q} quantile. Utilization is median demand served over paid GPU-hours.",
        "ru": "Простаивающие GPU-часы — плановая мощность сверх медианного спроса; недостающие GPU-часы — спрос сверх плановой мощности, по медиане и на квантиле {q}. Загрузка — обслуженный медианный спрос, делённый на оплаченные GPU-часы.",
    },
    "unserved_priced": {
        "en": "Unserved demand is counted at {price} per GPU-hour (finance.unserved_price_per_gpu_hour).",
        "ru": "Необслуженный спрос учитывается по цене {price} за GPU-час (finance.unserved_price_per_gpu_hour).",
    },
    "unserved_refused": {
        "en": "Unserved demand has no price in the configuration (finance.unserved_price_per_gpu_hour), so a level that leaves more demand unserved than keeping is refused.",
        "ru": "У необслуженного спроса нет цены в конфигурации (finance.unserved_price_per_gpu_hour), поэтому уровень, оставляющий больше необслуженного спроса, чем текущий, отклоняется.",
    },
    # Table titles (tbl_).
    "tbl_accuracy": {"en": "Backtest scores", "ru": "Оценки бэктеста"},
    "tbl_accuracy_by_lead": {
        "en": "Accuracy by lead day at the plan's horizon ({days} days)",
        "ru": "Точность по дням упреждения на горизонте плана ({days} дн.)",
    },
    "tbl_actions": {"en": "Actions", "ru": "Действия"},
    "tbl_commitment_options": {
        "en": "Commitment options, each projected like the baseline",
        "ru": "Варианты резервирования, каждый рассчитан как базовый",
    },
    "tbl_commitments": {"en": "Commitments", "ru": "Резервирование"},
    "tbl_cost_daily": {"en": "Planned cost per day", "ru": "Плановая стоимость по дням"},
    "tbl_cost_monthly": {"en": "Planned cost per month", "ru": "Плановая стоимость по месяцам"},
    "tbl_finance_demand": {
        "en": "Demand, capacity and waste per GPU model over the horizon",
        "ru": "Спрос, мощность и потери по моделям GPU за горизонт",
    },
    "tbl_hindsight_accuracy": {
        "en": "Forecasts of the review period against what happened",
        "ru": "Прогнозы периода обзора против факта",
    },
    "tbl_hindsight_pools": {
        "en": "Idle and short GPU-hours and their cost per pool",
        "ru": "Простой и нехватка GPU-часов и их стоимость по пулам",
    },
    "tbl_hindsight_tiers": {
        "en": "Idle and short GPU-hours and their cost per tier",
        "ru": "Простой и нехватка GPU-часов и их стоимость по типам",
    },
    "tbl_mig_nodes": {"en": "MIG layouts per node", "ru": "Разметка MIG по узлам"},
    "tbl_mig_pools": {
        "en": "MIG pools: the tier plan's nodes and the nodes the layouts cover",
        "ru": "Пулы MIG: узлы по плану типов и узлы, покрытые разметкой",
    },
    "tbl_mig_profiles": {
        "en": "MIG profiles: demand, capacity and cost",
        "ru": "Профили MIG: спрос, мощность и стоимость",
    },
    "tbl_monthly_by_model": {
        "en": "GPU-hours and cost per month and GPU model",
        "ru": "GPU-часы и стоимость по месяцам и моделям GPU",
    },
    "tbl_monthly_by_pool": {
        "en": "GPU-hours and cost per month and pool",
        "ru": "GPU-часы и стоимость по месяцам и пулам",
    },
    "tbl_monthly_by_tier": {
        "en": "GPU-hours and cost per month and tier",
        "ru": "GPU-часы и стоимость по месяцам и типам мощности",
    },
    "tbl_pools": {"en": "Pools", "ru": "Пулы"},
    "tbl_scenarios": {
        "en": "Scenario totals over the horizon",
        "ru": "Итоги сценариев за горизонт",
    },
    "tbl_scenarios_monthly": {
        "en": "Expected cost per month, by scenario",
        "ru": "Ожидаемая стоимость по месяцам и сценариям",
    },
    "tbl_signals": {"en": "Signals", "ru": "Сигналы"},
    "tbl_utilization": {
        "en": "Utilization and waste per GPU model",
        "ru": "Загрузка и потери по моделям GPU",
    },
    # Column headings (col_).
    "col_above_q": {"en": "Actual above {q}", "ru": "Факт выше {q}"},
    "col_alternative_price": {"en": "On-demand price/GPU-h", "ru": "Цена по запросу за GPU-ч"},
    "col_band": {"en": "Band", "ru": "Вариант"},
    "col_base_load": {"en": "Base load, GPUs", "ru": "Базовая нагрузка, GPU"},
    "col_binding": {"en": "Bound by", "ru": "Ограничено"},
    "col_break_even": {"en": "Break-even utilization", "ru": "Точка безубыточности"},
    "col_capacity_gpu_h": {"en": "Paid GPU-h", "ru": "Оплачено GPU-ч"},
    "col_capacity_instances": {"en": "Capacity, instances", "ru": "Мощность, экз."},
    "col_change_nodes": {"en": "Change", "ru": "Изменение"},
    "col_changed_utilization": {"en": "Changed GPUs busy", "ru": "Загрузка изменяемых GPU"},
    "col_chosen": {"en": "In use", "ru": "Используется"},
    "col_commit_utilization": {"en": "Committed GPUs busy", "ru": "Загрузка резерва"},
    "col_cost_band": {"en": "Cost, {band}", "ru": "Стоимость, {band}"},
    "col_energy_cost_band": {
        "en": "Energy cost, {band}",
        "ru": "Стоимость электроэнергии, {band}",
    },
    "col_energy_kwh_band": {"en": "Energy kWh, {band}", "ru": "Электроэнергия, кВт·ч, {band}"},
    "col_cost_delta": {"en": "Cost change per hour", "ru": "Изменение стоимости в час"},
    "col_cost_instance_hour": {"en": "Cost per instance-hour", "ru": "Стоимость экземпляра в час"},
    "col_coverage": {"en": "Coverage {low}–{high}", "ru": "Покрытие {low}–{high}"},
    "col_current_layout": {"en": "Current layout", "ru": "Текущая разметка"},
    "col_current_nodes": {"en": "Nodes now", "ru": "Узлов сейчас"},
    "col_decision": {"en": "Decision", "ru": "Решение"},
    "col_history_days": {"en": "History used, days", "ru": "История, дней"},
    "col_workload": {"en": "Workload", "ru": "Нагрузка"},
    "col_memory_q99": {"en": "Memory used q0.99, GB", "ru": "Память q0.99, ГБ"},
    "col_memory_given": {"en": "Memory given, GB", "ru": "Выделено памяти, ГБ"},
    "col_memory_share": {"en": "Share used", "ru": "Доля занятой"},
    "col_util_q99": {"en": "Busy q0.99, %", "ru": "Загрузка q0.99, %"},
    "col_fit": {"en": "Smallest fit", "ru": "Наименьшее подходящее"},
    "col_fit_fp8": {"en": "With FP8 weights", "ru": "С весами FP8"},
    "col_fit_int4": {"en": "With INT4 weights", "ru": "С весами INT4"},
    "sec_rightsizing": {"en": "Right-sizing", "ru": "Подбор размера"},
    "sec_rightsizing_intro": {
        "en": "For each workload with a memory signal: the q0.99 of the GPU memory one replica used over the history against what it is given, how busy it kept its GPU, and the smallest MIG profile of its GPU model (else the smallest GPU model) that holds it with {headroom}% to spare; with the model's size, also with its weights at FP8 and INT4.",
        "ru": "Для каждой нагрузки с сигналом памяти: квантиль q0.99 памяти GPU, которую занимал один экземпляр за историю, против выделенной, его загрузка GPU и наименьший профиль MIG её модели GPU (иначе наименьшая модель GPU), который вмещает его с запасом {headroom}%; при известном размере модели также с весами FP8 и INT4.",
    },
    "tbl_rightsizing": {"en": "Right-sizing by workload", "ru": "Подбор размера по нагрузкам"},
    "col_tokens_m": {"en": "Tokens, millions", "ru": "Токены, млн"},
    "col_per_m_tokens": {"en": "Per 1M tokens", "ru": "За 1 млн токенов"},
    "col_per_m_tokens_tier": {"en": "Per 1M tokens, {tier}", "ru": "За 1 млн токенов, {tier}"},
    "sec_tokens": {"en": "Cost per 1M tokens", "ru": "Стоимость 1 млн токенов"},
    "sec_tokens_intro": {
        "en": "For each workload with a token signal: its tokens over the horizon (median forecast), its share of its GPU model's planned GPU-hours and cost (its share of the model's median GPU demand), and what 1M tokens cost on the plan's mix of tiers and on each tier alone.",
        "ru": "Для каждой нагрузки с сигналом токенов: её токены за горизонт (медианный прогноз), её доля в плановых GPU-часах и стоимости своей модели GPU (её доля в медианном спросе модели на GPU) и стоимость 1 млн токенов при плановом сочетании типов и на каждом типе отдельно.",
    },
    "tbl_tokens": {
        "en": "Cost per 1M tokens by workload",
        "ru": "Стоимость 1 млн токенов по нагрузкам",
    },
    # Idle GPU-hours by workload (scaler.reports.workload_costs).
    "col_idle_share": {"en": "Idle share", "ru": "Доля простоя"},
    "col_replicas_per_gpu": {"en": "Replicas per GPU", "ru": "Экземпляров на GPU"},
    "col_sharing_mode": {"en": "GPU sharing", "ru": "Режим GPU"},
    "col_workload_planned_cost": {"en": "Planned cost", "ru": "Плановая стоимость"},
    "col_workload_planned_gpu_h": {"en": "Planned GPU-h at {q}", "ru": "Плановые GPU-ч на {q}"},
    "col_workload_used_gpu_h": {"en": "Used GPU-h at the median", "ru": "Занято GPU-ч по медиане"},
    "sec_workload_costs": {"en": "Idle GPU-hours by workload", "ru": "Простой GPU по нагрузкам"},
    "sec_workload_costs_intro": {
        "en": "Per workload over the horizon: the GPU-hours the plan gives it (its replicas' GPUs at {q}; on shared GPUs, its share of the physical GPUs of its pooling group), the GPU-hours its replicas at the median forecast use, the idle GPU-hours between the two (step by step, never below zero) and what they cost at the plan's price per GPU-hour of the GPU model (the mix of tiers the plan buys, as for the cost per 1M tokens). Time-sliced and MPS GPUs are priced once per physical GPU: the rows of a pooling group split its GPU-hours by their replicas. Capacity the plan buys beyond its workloads' demand (whole nodes, spot spares, near-term margins) is counted per GPU model, not here.",
        "ru": "По каждой нагрузке за горизонт: GPU-часы, которые ей даёт план (GPU её экземпляров на {q}; на общих GPU — её доля физических GPU её группы совместного размещения), GPU-часы, которые занимают её экземпляры по медианному прогнозу, простой между ними (по шагам, не ниже нуля) и его стоимость по плановой цене GPU-часа модели GPU (при плановом сочетании типов, как в стоимости 1 млн токенов). GPU с разделением по времени и MPS оплачиваются один раз за физический GPU: строки группы делят её GPU-часы по числу экземпляров. Мощность, которую план покупает сверх спроса нагрузок (целые узлы, запасные спот-узлы, запас на ближайшее время), учтена по моделям GPU, а не здесь.",
    },
    "sharing_mode_mig": {"en": "MIG", "ru": "MIG"},
    "sharing_mode_mps": {"en": "MPS", "ru": "MPS"},
    "sharing_mode_time-slicing": {"en": "time-slicing", "ru": "разделение по времени"},
    "sharing_mode_whole": {"en": "whole GPUs", "ru": "целые GPU"},
    "tbl_workload_costs": {
        "en": "Planned, used and idle GPU-hours by workload",
        "ru": "Плановые, занятые и простаивающие GPU-часы по нагрузкам",
    },
    "workload_costs_group": {
        "en": "Pooling group {group} ({workloads}, {replicas} replicas per GPU): {hours} GPU-h of physical GPUs, the sum of its rows.",
        "ru": "Группа совместного размещения {group} ({workloads}, экземпляров на GPU: {replicas}): {hours} GPU-ч физических GPU — сумма её строк.",
    },
    "workload_costs_no_data": {
        "en": "No data, so no idle is claimed: {workloads}.",
        "ru": "Нет данных, поэтому простой не указан: {workloads}.",
    },
    "workload_missing_no_forecast": {"en": "no forecast", "ru": "нет прогноза"},
    "workload_missing_no_median": {
        "en": "no median over the plan",
        "ru": "нет медианы на горизонте плана",
    },
    "workload_missing_stale": {"en": "stale signal", "ru": "сигнал устарел"},
    "workload_no_data": {"en": "no data", "ru": "нет данных"},
    "charts_daily": {
        "en": "The plan spans more than {days} days, so its charts show daily means.",
        "ru": "План длиннее {days} дней, поэтому графики показывают средние за сутки.",
    },
    "sec_cost_intro_weekly": {
        "en": "Planned spend by tier (reserved, on-demand, spot), per week (from its Monday) and per calendar month of the plan's horizon, at the configured price per GPU-hour. A week or month the horizon covers only in part is marked with the days it covers; its cost is of those days only.",
        "ru": "Плановые расходы по типам (зарезервированные, по запросу, спотовые) за каждую неделю (с понедельника) и календарный месяц горизонта плана по ценам GPU-часа из конфигурации. Неделя или месяц, которые горизонт покрывает лишь частично, помечены числом покрытых дней; их стоимость — только за эти дни.",
    },
    "period_partial": {
        "en": "{period} (partial: {days} of {whole} days)",
        "ru": "{period} (неполный: {days} из {whole} дн.)",
    },
    "col_days": {"en": "Days", "ru": "Дней"},
    "charts_daily_mig": {
        "en": "The MIG charts show each day's peak, the moment the layouts are cut for.",
        "ru": "Графики MIG показывают пик каждого дня — момент, под который нарезаны разметки.",
    },
    "tbl_cost_weekly": {
        "en": "Cost per week (weeks from Monday)",
        "ru": "Стоимость по неделям (недели с понедельника)",
    },
    "col_definition": {"en": "Definition", "ru": "Определение"},
    "col_delta_band": {"en": "Change vs baseline, {band}", "ru": "Изменение к базовому, {band}"},
    "col_delta_percent_band": {"en": "Change %, {band}", "ru": "Изменение %, {band}"},
    "col_demand_gpu_h": {"en": "Demand GPU-h", "ru": "Спрос GPU-ч"},
    "col_demand_median_gpu_h": {"en": "Median demand GPU-h", "ru": "Медианный спрос GPU-ч"},
    "col_demand_q_gpu_h": {"en": "{q} demand GPU-h", "ru": "Спрос {q} GPU-ч"},
    "col_estimator": {"en": "Estimator", "ru": "Модель"},
    "col_figure": {"en": "Figure", "ru": "Показатель"},
    "col_gpu_hours_band": {"en": "GPU-h, {band}", "ru": "GPU-ч, {band}"},
    "col_gpu_model": {"en": "GPU model", "ru": "Модель GPU"},
    "col_gpu_share": {"en": "Share of a GPU", "ru": "Доля GPU"},
    "col_gpus_changed": {"en": "GPUs re-partitioned", "ru": "Переразмечено GPU"},
    "col_gpus_per_node": {"en": "GPUs/node", "ru": "GPU/узел"},
    "col_horizon_h": {"en": "Horizon, h", "ru": "Горизонт, ч"},
    "col_hours": {"en": "Hours", "ru": "Часов"},
    "col_idle_cost": {"en": "Idle cost", "ru": "Стоимость простоя"},
    "col_idle_gpu_h": {"en": "Idle GPU-h", "ru": "Простой GPU-ч"},
    "col_last_timestamp": {"en": "Last sample (UTC)", "ru": "Последнее измерение (UTC)"},
    "col_last_value": {"en": "Last value", "ru": "Последнее значение"},
    "col_lead_min": {"en": "Lead time, min", "ru": "Время подготовки, мин"},
    "col_lead_day": {"en": "Lead day", "ru": "День упреждения"},
    "col_mae": {"en": "Mean absolute error (median)", "ru": "Средняя абсолютная ошибка (медиана)"},
    "col_mase": {"en": "MASE", "ru": "MASE"},
    "col_mig_gpus": {"en": "GPUs laid out", "ru": "Размеченных GPU"},
    "col_mig_gpus_used": {"en": "GPUs used", "ru": "Используемых GPU"},
    "col_mig_nodes": {"en": "Nodes with a MIG layout", "ru": "Узлов с разметкой MIG"},
    "col_month": {"en": "Month", "ru": "Месяц"},
    "col_needed_at": {"en": "Needed at (UTC)", "ru": "Нужно к (UTC)"},
    "col_node": {"en": "Node", "ru": "Узел"},
    "col_nodes": {"en": "Nodes", "ru": "Узлы"},
    "col_option_nodes": {"en": "Reserved nodes", "ru": "Узлов в резерве"},
    "col_origins": {"en": "Origins", "ru": "Точек отсчёта"},
    "col_peak_instances": {"en": "Peak demand, instances", "ru": "Пиковый спрос, экз."},
    "col_peak_q": {"en": "Peak {q}", "ru": "Пик {q}"},
    "col_period": {"en": "Period", "ru": "Период"},
    "col_pinball": {"en": "Pinball {q} (scaled)", "ru": "Pinball {q} (норм.)"},
    "col_planned_gpu_h": {"en": "Planned GPU-h", "ru": "Плановые GPU-ч"},
    "col_points": {"en": "Points", "ru": "Точек"},
    "col_pool": {"en": "Pool", "ru": "Пул"},
    "col_price_gpu_hour": {"en": "Price per GPU-hour", "ru": "Цена GPU-часа"},
    "col_profile": {"en": "Profile", "ru": "Профиль"},
    "col_reason": {"en": "Reason", "ru": "Причина"},
    "col_recommended_nodes": {"en": "Recommended nodes", "ru": "Рекомендовано узлов"},
    "col_reserved_price": {"en": "Reserved price/GPU-h", "ru": "Цена резерва за GPU-ч"},
    "col_saving_band": {"en": "Saving per month, {band}", "ru": "Экономия в месяц, {band}"},
    "col_scenario": {"en": "Scenario", "ru": "Сценарий"},
    "col_short_cost": {"en": "Short cost", "ru": "Стоимость нехватки"},
    "col_short_gpu_h": {"en": "Short GPU-h", "ru": "Нехватка GPU-ч"},
    "col_short_q_gpu_h": {"en": "Short GPU-h at {q}", "ru": "Нехватка GPU-ч на {q}"},
    "col_shortfall_instances": {"en": "Short, instances", "ru": "Нехватка, экз."},
    "col_signal": {"en": "Signal", "ru": "Сигнал"},
    "col_stale": {"en": "Stale", "ru": "Устарел"},
    "col_target_layout": {"en": "Target layout", "ru": "Целевая разметка"},
    "col_target_max": {"en": "Max target", "ru": "Макс. цель"},
    "col_target_now": {"en": "Target now", "ru": "Цель сейчас"},
    "col_term": {"en": "Term", "ru": "Срок"},
    "col_tier": {"en": "Tier", "ru": "Тип"},
    "col_total": {"en": "Total", "ru": "Итого"},
    "col_unit": {"en": "Unit", "ru": "Единица"},
    "col_unserved_after": {
        "en": "Unserved GPU-h advised (expected)",
        "ru": "Не обслужено GPU-ч по совету (ожид.)",
    },
    "col_unserved_band": {"en": "Unserved GPU-h, {band}", "ru": "Не обслужено GPU-ч, {band}"},
    "col_unserved_now": {
        "en": "Unserved GPU-h now (expected)",
        "ru": "Не обслужено GPU-ч сейчас (ожид.)",
    },
    "col_used_gpu_h": {"en": "Used GPU-h", "ru": "Использовано GPU-ч"},
    "col_utilization": {"en": "Utilization", "ru": "Загрузка"},
    "col_value": {"en": "Value", "ru": "Значение"},
    "col_verdict": {"en": "Verdict", "ru": "Вывод"},
    # Charts: titles (chart_), legends (legend_), axes (axis_).
    "axis_cost": {"en": "cost", "ru": "стоимость"},
    "axis_cost_per_hour": {"en": "cost per hour", "ru": "стоимость в час"},
    "axis_gpus": {"en": "GPUs", "ru": "GPU"},
    "axis_instances": {"en": "instances", "ru": "экземпляры"},
    "axis_coverage_percent": {"en": "coverage, %", "ru": "покрытие, %"},
    "axis_lead_day": {"en": "lead day", "ru": "день упреждения"},
    "axis_month": {"en": "month", "ru": "месяц"},
    "axis_time_utc": {"en": "time (UTC)", "ru": "время (UTC)"},
    "chart_capacity": {
        "en": "{model}: planned GPUs per pool vs forecast demand",
        "ru": "{model}: плановые GPU по пулам против прогноза спроса",
    },
    "chart_capacity_alt": {
        "en": "Planned GPUs per pool and forecast GPU demand for {model}",
        "ru": "Плановые GPU по пулам и прогноз спроса на GPU для {model}",
    },
    "chart_cost_tier": {
        "en": "Planned spend per hour by tier",
        "ru": "Плановые расходы в час по типам мощности",
    },
    "chart_hindsight_capacity": {
        "en": "{model}: planned GPUs vs actual demand",
        "ru": "{model}: плановые GPU против фактического спроса",
    },
    "chart_hindsight_signal": {
        "en": "{name}: forecast made for each moment vs what happened",
        "ru": "{name}: прогноз на каждый момент против факта",
    },
    "chart_mig": {
        "en": "{model}: MIG instances needed per profile vs planned layouts",
        "ru": "{model}: нужные экземпляры MIG по профилям против плановых разметок",
    },
    "chart_monthly_tier": {
        "en": "Expected cost per month by tier (whiskers: low–high)",
        "ru": "Ожидаемая стоимость по месяцам и типам (усы: низкий–высокий)",
    },
    "chart_scenarios": {
        "en": "Expected cost per month by scenario (whiskers: low–high)",
        "ru": "Ожидаемая стоимость по месяцам и сценариям (усы: низкий–высокий)",
    },
    "chart_signal": {"en": "{name}: history and forecast", "ru": "{name}: история и прогноз"},
    "chart_lead_accuracy": {
        "en": "{name}: error and band coverage by lead day",
        "ru": "{name}: ошибка и покрытие полосы по дням упреждения",
    },
    "chart_signal_alt": {
        "en": "History and forecast of {name} in {unit}",
        "ru": "История и прогноз {name} в {unit}",
    },
    "legend_actual": {"en": "actual", "ru": "факт"},
    "legend_actual_gpus": {"en": "actual demand", "ru": "фактический спрос"},
    "legend_band": {"en": "forecast {low}–{high}", "ru": "прогноз {low}–{high}"},
    "legend_demand_median": {"en": "median demand", "ru": "медианный спрос"},
    "legend_demand_q": {"en": "demand at {q}", "ru": "спрос на {q}"},
    "legend_forecast_gpus": {
        "en": "forecast demand (capacity quantile)",
        "ru": "прогноз спроса (квантиль мощности)",
    },
    "legend_history": {"en": "history", "ru": "история"},
    "legend_idle": {"en": "idle", "ru": "простой"},
    "legend_low_high": {"en": "low–high", "ru": "низкий–высокий"},
    "legend_median": {"en": "median forecast", "ru": "медианный прогноз"},
    "legend_lead_coverage": {"en": "coverage {low}–{high}", "ru": "покрытие {low}–{high}"},
    "legend_mase": {"en": "MASE of the median", "ru": "MASE медианы"},
    "legend_mig_capacity": {"en": "{profile} planned", "ru": "{profile}: по плану"},
    "legend_mig_demand": {"en": "{profile} needed", "ru": "{profile}: нужно"},
    "legend_planned": {"en": "planned GPUs", "ru": "плановые GPU"},
    "legend_policy_quantile": {"en": "{q} (capacity target)", "ru": "{q} (цель мощности)"},
    "legend_short": {"en": "short", "ru": "нехватка"},
    "axis_percent": {"en": "%", "ru": "%"},
    "legend_mig_slices": {"en": "MIG instances in use", "ru": "занятые экземпляры MIG"},
    "legend_mig_compute": {
        "en": "GPU compute they take",
        "ru": "вычисления GPU, которые они занимают",
    },
    "chart_mig_use": {
        "en": "{model}: MIG instances in use and the GPU compute they take",
        "ru": "{model}: занятые экземпляры MIG и вычисления GPU, которые они занимают",
    },
    # Words in cells and sentences: bands, tiers, terms, decisions, kinds of commitment
    # advice (commit_) and verdicts on commitment options (option_).
    "band_case_expected": {"en": "in the expected case", "ru": "в ожидаемом случае"},
    "band_case_high": {"en": "if demand comes in high", "ru": "при высоком спросе"},
    "band_case_low": {"en": "if demand comes in low", "ru": "при низком спросе"},
    "band_expected": {"en": "expected", "ru": "ожидаемый"},
    "band_high": {"en": "high", "ru": "высокий"},
    "band_low": {"en": "low", "ru": "низкий"},
    "commit_kind_commit": {"en": "commit more", "ru": "добавить резерв"},
    "commit_kind_keep": {"en": "keep", "ru": "оставить"},
    "commit_kind_release": {"en": "release", "ru": "сократить"},
    "decision_no_op": {"en": "no change", "ru": "без изменений"},
    # What `tiercast plan --lang ru` prints around its table (English keeps its own lines).
    "plan_mode_dry_run": {"en": "dry-run", "ru": "без изменений в кластере"},
    "plan_mode_live": {"en": "live", "ru": "с изменениями в кластере"},
    "plan_forecast_line": {
        "en": "forecast: quantile {q}, horizon {hours} h, step {step} s",
        "ru": "прогноз: квантиль {q}, горизонт {hours} ч, шаг {step} с",
    },
    "plan_signal_line": {
        "en": "last {last} {unit} at {at}; peak {q} {peak}",
        "ru": "последнее {last} {unit} в {at}; пик {q} {peak}",
    },
    "plan_stale": {"en": "STALE", "ru": "УСТАРЕЛО"},
    "plan_note": {"en": "note", "ru": "примечание"},
    "plan_cost_line": {
        "en": "cost: {now}/h now -> {planned}/h planned; {total} over the horizon; "
        "expected unserved {unserved} GPU-h",
        "ru": "стоимость: {now} в час сейчас → {planned} в час по плану; {total} за горизонт; "
        "ожидаемый недообслуженный спрос {unserved} GPU-ч",
    },
    "plan_only": {
        "en": "plan only: nothing was applied or recorded (tiercast run --dry-run records the calls)",
        "ru": "только план: ничего не применено и не записано (tiercast run --dry-run записывает вызовы)",
    },
    "plan_written": {"en": "plan written to {path}", "ru": "план записан в {path}"},
    "decision_relayout": {"en": "MIG relayout", "ru": "перестроить MIG"},
    "decision_scale_down": {"en": "scale down", "ru": "уменьшить"},
    "decision_scale_up": {"en": "scale up", "ru": "увеличить"},
    "option_current": {"en": "current", "ru": "текущий"},
    "option_loses": {
        "en": "against keeping, loses {amount} {band}",
        "ru": "по сравнению с текущим резервом потеря {amount} {band}",
    },
    "option_recommended": {"en": "advised", "ru": "рекомендуется"},
    "option_refused_band": {
        "en": "refused: leaves {unserved} more GPU-h unserved {band}",
        "ru": "отклонён: ещё {unserved} GPU-ч спроса не обслужено {band}",
    },
    "option_saves_less": {
        "en": "qualifies, but saves {amount} less than the advice in the expected case",
        "ru": "допустим, но экономит на {amount} меньше совета в ожидаемом случае",
    },
    "option_unserved_vs_advice": {
        "en": "cheaper, but leaves {unserved} more GPU-h unserved {band} than the advice",
        "ru": "дешевле, но оставляет на {unserved} GPU-ч больше необслуженного спроса {band}, чем совет",
    },
    "layout_unchanged": {"en": "unchanged", "ru": "без изменений"},
    "profile_whole": {"en": "whole", "ru": "целый GPU"},
    "term_1y": {"en": " on a 1-year term", "ru": " на 1 год"},
    "term_3y": {"en": " on a 3-year term", "ru": " на 3 года"},
    "tier_on-demand": {"en": "on-demand", "ru": "по запросу"},
    "tier_reserved": {"en": "reserved", "ru": "резерв"},
    "tier_spot": {"en": "spot", "ru": "спот"},
    # Sentences built from the data: commitment advice (advice_, one per reason), an
    # action's reason when none of its phrases is known (reason_, one per decision) and
    # the projection's notes (note_, one per Note.key).
    "advice_commit": {
        "en": "{model}: commit {nodes} more node(s) ({gpus} GPUs) on {pool}{term}, from {current} to {recommended}. Base load (low forecast, 95% of hours) is {base} GPUs against {committed} committed; the added GPUs are {changed}% busy in the expected case, above the break-even {break_even}% ({price} vs on-demand {alternative} per GPU-hour). Saves {saving} per month expected ({saving_low} low, {saving_high} high).",
        "ru": "{model}: зарезервировать ещё {nodes} узл. ({gpus} GPU) в пуле {pool}{term}, с {current} до {recommended}. Базовая нагрузка (низкий прогноз, 95% часов) — {base} GPU при {committed} зарезервированных; добавленные GPU заняты на {changed}% в ожидаемом случае, выше точки безубыточности {break_even}% ({price} против {alternative} по запросу за GPU-час). Экономия {saving} в месяц в ожидаемом случае ({saving_low} при низком, {saving_high} при высоком спросе).",
    },
    "advice_commit_unserved": {
        "en": "{model}: commit {nodes} more node(s) ({gpus} GPUs) on {pool}{term}, from {current} to {recommended}. Base load (low forecast, 95% of hours) is {base} GPUs, more than the {committed} committed, and the other pools are at max_nodes: keeping leaves {unserved_now} GPU-h unserved in the expected case, committing leaves {unserved}. The added GPUs are {changed}% busy (break-even {break_even}% at {price} vs on-demand {alternative} per GPU-hour); this costs {extra} more per month expected.",
        "ru": "{model}: зарезервировать ещё {nodes} узл. ({gpus} GPU) в пуле {pool}{term}, с {current} до {recommended}. Базовая нагрузка (низкий прогноз, 95% часов) — {base} GPU, больше {committed} зарезервированных, а остальные пулы упираются в max_nodes: без изменений в ожидаемом случае не обслужено {unserved_now} GPU-ч, с резервом — {unserved}. Добавленные GPU заняты на {changed}% (точка безубыточности {break_even}% при {price} против {alternative} по запросу за GPU-час); это дороже на {extra} в месяц в ожидаемом случае.",
    },
    "advice_keep_busy": {
        "en": "{model}: keep {current} node(s) on {pool}. Committed GPUs are {utilization}% busy in the expected case and the last node {changed}%, above the break-even {break_even}% (reserved {reserved} vs on-demand {alternative} per GPU-hour); no other level saves money in the low, expected and high case alike.",
        "ru": "{model}: оставить {current} узл. в пуле {pool}. Зарезервированные GPU заняты на {utilization}% в ожидаемом случае, последний узел — на {changed}%, выше точки безубыточности {break_even}% (резерв {reserved} против {alternative} по запросу за GPU-час); никакой другой объём резерва не экономит одновременно при низком, ожидаемом и высоком спросе.",
    },
    "advice_keep_none": {
        "en": "{model}: commit nothing on {pool}. Base load (low forecast, 95% of hours) is {base} GPUs; committing one node would cost {loss} more per month {band} (break-even {break_even}% at {price} vs on-demand {alternative} per GPU-hour).",
        "ru": "{model}: ничего не резервировать в пуле {pool}. Базовая нагрузка (низкий прогноз, 95% часов) — {base} GPU; резерв одного узла обойдётся на {loss} в месяц дороже {band} (точка безубыточности {break_even}% при {price} против {alternative} по запросу за GPU-час).",
    },
    "advice_keep_release_loses": {
        "en": "{model}: keep {current} node(s) on {pool}. Committed GPUs are {utilization}% busy in the expected case, below the break-even {break_even}% (reserved {reserved} vs on-demand {alternative} per GPU-hour), but releasing one node would cost {loss} more per month {band}, so no release saves in every case.",
        "ru": "{model}: оставить {current} узл. в пуле {pool}. Зарезервированные GPU заняты на {utilization}% в ожидаемом случае, ниже точки безубыточности {break_even}% (резерв {reserved} против {alternative} по запросу за GPU-час), но отказ от одного узла обойдётся на {loss} в месяц дороже {band}, поэтому ни одно сокращение не экономит во всех случаях.",
    },
    "advice_keep_release_unserved": {
        "en": "{model}: keep {current} node(s) on {pool}. Committed GPUs are {utilization}% busy in the expected case (break-even {break_even}%, reserved {reserved} vs on-demand {alternative} per GPU-hour); releasing one node would leave {loss} more GPU-h of demand unserved {band}, because the other pools are at max_nodes.",
        "ru": "{model}: оставить {current} узл. в пуле {pool}. Зарезервированные GPU заняты на {utilization}% в ожидаемом случае (точка безубыточности {break_even}%, резерв {reserved} против {alternative} по запросу за GPU-час); отказ от одного узла оставит ещё {loss} GPU-ч спроса необслуженными {band}, потому что остальные пулы упираются в max_nodes.",
    },
    "advice_release": {
        "en": "{model}: release {nodes} node(s) ({gpus} GPUs) on {pool} at renewal, from {current} to {recommended}. The released GPUs are {changed}% busy in the expected case, below the break-even {break_even}% (reserved {reserved} vs on-demand {alternative} per GPU-hour); unserved demand stays {unserved} GPU-h expected (now {unserved_now}). Saves {saving} per month expected ({saving_low} low, {saving_high} high).",
        "ru": "{model}: при продлении отказаться от {nodes} узл. ({gpus} GPU) в пуле {pool}, с {current} до {recommended}. Освобождаемые GPU заняты на {changed}% в ожидаемом случае, ниже точки безубыточности {break_even}% (резерв {reserved} против {alternative} по запросу за GPU-час); необслуженный спрос в ожидаемом случае {unserved} GPU-ч (сейчас {unserved_now}). Экономия {saving} в месяц в ожидаемом случае ({saving_low} при низком, {saving_high} при высоком спросе).",
    },
    "trade_level": {"en": "{nodes} node(s){term}", "ru": "{nodes} узл.{term}"},
    "trade_loses": {"en": "loses {amount}", "ru": "потеря {amount}"},
    "trade_offs": {
        "en": "Over the horizon, against {recommended} node(s): {clauses}.",
        "ru": "За горизонт, по сравнению с {recommended} узл.: {clauses}.",
    },
    "trade_priced": {
        "en": "{level} {low} low, {expected} expected, {high} high (the {band} case decides)",
        "ru": "{level} — {low} при низком, {expected} при ожидаемом, {high} при высоком спросе (решает вариант «{band}»)",
    },
    "trade_refused": {
        "en": "{level} is refused: it leaves {unserved} more GPU-h unserved (the {band} case decides)",
        "ru": "{level} — отклонено: ещё {unserved} GPU-ч спроса остаются необслуженными (решает вариант «{band}»)",
    },
    "trade_same": {"en": "no change", "ru": "без изменений"},
    "trade_saves": {"en": "saves {amount}", "ru": "экономия {amount}"},
    "note_no_alternative_pool": {
        "en": "{model}: only reserved pools, so there is nothing a commitment would replace.",
        "ru": "{model}: есть только пулы резерва, резервированию нечего заменять.",
    },
    "note_no_forecast": {
        "en": "Signal {signal} has no usable history; it is left out of the projection.",
        "ru": "У сигнала {signal} нет пригодной истории; он не вошёл в прогноз.",
    },
    "note_no_reserved_pool": {
        "en": "{model}: no reserved pool in the configuration, so no commitment advice; add a reserved pool with its price to get one.",
        "ru": "{model}: в конфигурации нет пула резерва, поэтому совета по резервированию нет; добавьте пул резерва с его ценой.",
    },
    "note_short_forecast": {
        "en": "The forecast of {signal} ends at {until}; later hours repeat its last value.",
        "ru": "Прогноз {signal} заканчивается в {until}; в последующие часы повторяется его последнее значение.",
    },
    "reason_no_op": {
        "en": "{pool}: {current} node(s) cover {q} demand at {needed_at} (lead time {lead} min); cost unchanged. Bound by: {bound}.",
        "ru": "{pool}: {current} узл. покрывают спрос {q} к {needed_at} (время подготовки {lead} мин); стоимость не меняется. Ограничено: {bound}.",
    },
    "reason_relayout": {
        "en": "{pool}: change the MIG layout; nodes {current} → {target}.",
        "ru": "{pool}: изменить разметку MIG; узлы {current} → {target}.",
    },
    "reason_scale_down": {
        "en": "{pool}: −{amount} node(s), {current} → {target}; {q} demand stays below the rest through lead time {lead} min and the stabilization window; saves {cost} per hour. Bound by: {bound}.",
        "ru": "{pool}: −{amount} узл., {current} → {target}; спрос {q} остаётся ниже оставшейся мощности в течение времени подготовки {lead} мин и окна стабилизации; экономия {cost} в час. Ограничено: {bound}.",
    },
    "reason_scale_up": {
        "en": "{pool}: +{amount} node(s), {current} → {target}, so that {q} demand is covered at {needed_at} (lead time {lead} min); +{cost} per hour. Bound by: {bound}.",
        "ru": "{pool}: +{amount} узл., {current} → {target}, чтобы спрос {q} был покрыт к {needed_at} (время подготовки {lead} мин); +{cost} в час. Ограничено: {bound}.",
    },
    # How the totals of the review and the finance report relate (rec_, reconcile.py), why a
    # GPU model has no commitment row (commit_no_row_), partial periods and daily charts.
    "sec_reconcile": {"en": "How the totals relate", "ru": "Как связаны итоги"},
    "sec_reconcile_intro": {
        "en": "The capacity review and the finance dry-run plan one fleet from one forecast, and each shows its own totals over the horizon. Here is every one of them, what it counts, and the differences from each to the next with their reasons, all computed from the same plan and projection: each total is the one above it plus the differences between them.",
        "ru": "Обзор мощности и финансовый прогноз планируют один парк по одному прогнозу, и каждый показывает свои итоги за горизонт. Здесь все эти итоги, что каждый из них считает, и разницы от каждого к следующему с их причинами, рассчитанные из того же плана и прогноза: каждый итог равен итогу над ним плюс разницы между ними.",
    },
    "tbl_reconcile": {
        "en": "Totals over the horizon and the differences between them",
        "ru": "Итоги за горизонт и разницы между ними",
    },
    "col_rec_total": {"en": "Total", "ru": "Итог"},
    "col_rec_value": {"en": "Amount", "ru": "Сумма"},
    "col_rec_difference": {"en": "Difference to the next", "ru": "Разница к следующему"},
    "col_rec_why": {
        "en": "What it counts, or why it differs",
        "ru": "Что учтено или откуда разница",
    },
    "rec_total_workloads": {
        "en": "Idle GPU-hours by workload: planned cost (total)",
        "ru": "Простой GPU по нагрузкам: плановая стоимость (итого)",
    },
    "rec_counts_workloads": {
        "en": "the served workloads' GPU-hours at {q} (the GPUs their replicas take), each priced at the plan's price per GPU-hour of its GPU model",
        "ru": "GPU-часы обслуживаемых нагрузок по {q} (GPU их реплик), каждый по плановой цене GPU-часа своей модели GPU",
    },
    "rec_total_plan": {
        "en": "Capacity review: planned cost over the horizon",
        "ru": "Обзор мощности: плановая стоимость за горизонт",
    },
    "rec_counts_plan": {
        "en": "every pool's planned nodes at {q}, every {step} min over {hours} h, lead times, stabilization and near-term margins included: what the cycle would buy",
        "ru": "плановые узлы каждого пула по {q}, каждые {step} мин за {hours} ч, с учётом времени подготовки, стабилизации и краткосрочного запаса: то, что купил бы цикл",
    },
    "rec_total_high": {
        "en": "Finance dry-run: cost, high ({high})",
        "ru": "Финансовый прогноз: стоимость, высокий ({high})",
    },
    "rec_counts_high": {
        "en": "every pool, hour by hour: the hourly peak of the {high} forecast filled with the planner's allocation, reserved pools held at their commitment, billing periods applied",
        "ru": "каждый пул, час за часом: часовой пик прогноза {high}, распределённый по пулам так же, как это делает планировщик; пулы резерва на уровне их резерва, с учётом периодов оплаты",
    },
    "rec_total_expected": {
        "en": "Finance dry-run: cost, expected (median)",
        "ru": "Финансовый прогноз: стоимость, ожидаемый (медиана)",
    },
    "rec_counts_expected": {
        "en": "the same projection at the median forecast",
        "ru": "тот же прогноз по медиане",
    },
    "rec_total_commitments": {
        "en": "Commitment options: the advised option, expected cost",
        "ru": "Варианты резерва: рекомендованный вариант, ожидаемая стоимость",
    },
    "rec_counts_commitments": {
        "en": "the pools of {models} only, at the advised commitment, in the expected case, priced by the hour",
        "ru": "только пулы {models}, при рекомендованном резерве, в ожидаемом случае, по часам",
    },
    "rec_step_beyond_workloads": {
        "en": "{model}: {gpu_hours} GPU-h the plan buys beyond its workloads' demand (whole nodes, spot spares, near-term margins), at {price} per GPU-hour",
        "ru": "{model}: {gpu_hours} GPU-ч, которые план покупает сверх спроса нагрузок (целые узлы, запас спота, краткосрочный запас), по {price} за GPU-час",
    },
    "rec_step_no_workload": {
        "en": "{model}: {gpu_hours} GPU-h the plan buys with no served workload counted on them, at {price} per GPU-hour",
        "ru": "{model}: {gpu_hours} GPU-ч, которые план покупает без учтённой на них обслуживаемой нагрузки, по {price} за GPU-час",
    },
    "rec_step_projection": {
        "en": "{pool} ({tier}): {proj_h} GPU-h in the projection's hourly fill of the {high} band instead of {plan_h} GPU-h of the plan's targets at {q} every {step} min",
        "ru": "{pool} ({tier}): {proj_h} GPU-ч в почасовом заполнении варианта {high} вместо {plan_h} GPU-ч плановых целей по {q} каждые {step} мин",
    },
    "rec_step_band": {
        "en": "{pool} ({tier}): demand at the median instead of {high}, {expected_h} GPU-h instead of {high_h}",
        "ru": "{pool} ({tier}): спрос по медиане вместо {high}, {expected_h} GPU-ч вместо {high_h}",
    },
    "rec_step_not_advised": {
        "en": "{model} ({pools}) left out: the commitment options cover only GPU models with advice. {why}",
        "ru": "{model} ({pools}) не учтена: варианты резерва охватывают только модели GPU с советом. {why}",
    },
    "rec_step_advised": {
        "en": "{model}: the advised option ({nodes} reserved node(s){term}, {current} now) in place of the baseline's pools of {model}, priced by the hour without billing periods",
        "ru": "{model}: рекомендованный вариант ({nodes} узл. резерва{term}, сейчас {current}) вместо пулов {model} базового прогноза, по часам, без периодов оплаты",
    },
    "note_no_advice": {
        "en": "{model}: no commitment advice.",
        "ru": "{model}: совета по резервированию нет.",
    },
    "commit_no_row_no_reserved": {
        "en": "{model} has no row here: it has no reserved pool in the configuration, so there is no commitment to advise on; add a reserved pool with its price to get one.",
        "ru": "Для {model} здесь нет строки: в конфигурации у неё нет пула резерва, так что советовать не о чем; добавьте пул резерва с его ценой.",
    },
    "commit_no_row_only_reserved": {
        "en": "{model} has no row here: its only pools ({pools}) are reserved, so there is no on-demand price to weigh a commitment against and no other pool to take the demand a release would leave; add an on-demand {model} pool with its price to get advice.",
        "ru": "Для {model} здесь нет строки: все её пулы ({pools}) — резерв, так что нет цены по запросу, с которой сравнить резерв, и нет другого пула для спроса, который оставит сокращение; добавьте пул {model} по запросу с его ценой, чтобы получить совет.",
    },
    "commit_no_row_only_reserved_idle": {
        "en": "{model} has no row here: its only pools ({pools}) are reserved, so there is no on-demand price to weigh a commitment against and no other pool to take the demand a release would leave. Its committed GPU-hours are {share}% idle in the expected case ({idle} of {reserved} GPU-h, {cost} over the horizon); a smaller commitment at renewal, or more work placed on it, is what would reduce that. Add an on-demand {model} pool with its price to get advice.",
        "ru": "Для {model} здесь нет строки: все её пулы ({pools}) — резерв, так что нет цены по запросу, с которой сравнить резерв, и нет другого пула для спроса, который оставит сокращение. Её зарезервированные GPU-часы простаивают на {share}% в ожидаемом случае ({idle} из {reserved} GPU-ч, {cost} за горизонт); уменьшить это может меньший резерв при продлении или больше работы на нём. Добавьте пул {model} по запросу с его ценой, чтобы получить совет.",
    },
    # Terminal output of the finance dry-run and the report (cli_).
    "cli_commitments": {"en": "commitment advice", "ru": "совет по резервированию"},
    "cli_finance_header": {
        "en": "finance dry-run: {start} to {end} UTC, bands low {low} / expected median / high {high}; costs in {currency}",
        "ru": "финансовый прогноз: с {start} по {end} UTC, варианты: низкий {low} / ожидаемый медиана / высокий {high}; стоимость в {currency}",
    },
    "cli_monthly": {
        "en": "GPU-hours and cost per month and tier (expected, low–high)",
        "ru": "GPU-часы и стоимость по месяцам и типам (ожидаемая, низкий–высокий)",
    },
    "cli_monthly_model": {"en": "per month and GPU model", "ru": "по месяцам и моделям GPU"},
    "cli_monthly_pool": {"en": "per month and pool", "ru": "по месяцам и пулам"},
    "cli_note": {"en": "note", "ru": "примечание"},
    "cli_report_written": {"en": "report written to {path}", "ru": "отчёт записан в {path}"},
    "cli_scenarios": {
        "en": "scenarios (total over the horizon)",
        "ru": "сценарии (итого за горизонт)",
    },
    "cli_written": {
        "en": "finance report written to {path}",
        "ru": "финансовый отчёт записан в {path}",
    },
}
"""Key -> language -> string; every key has every language of :data:`LANGS`."""

STRINGS: dict[str, dict[str, str]] = {
    lang: {key: texts[lang] for key, texts in TEXTS.items() if lang in texts} for lang in LANGS
}
"""Language -> key -> string: :data:`TEXTS` by language, as :func:`t` reads it."""


_SOURCES: dict[str, dict[str, str]] = {
    "built-in demo fleet": {"ru": "встроенный демонстрационный парк"},
    "built-in demo config": {"ru": "встроенная демонстрационная конфигурация"},
}
"""Sources that are words rather than a path (:mod:`scaler.inputs.loading`), per language."""


def translate_source(source: str, lang: str) -> str:
    """Where a report's data came from in ``lang``: a file path as it is, the built-in demo
    in the reader's words."""
    return _SOURCES.get(source, {}).get(lang, source)


def translate_bound(name: str, lang: str) -> str:
    """What binds a pool (``bridging``, ``max_nodes``, ...) in ``lang``."""
    return term(name, lang)
