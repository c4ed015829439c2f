#pragma once
// The --report pages of compare, underflow, resq and golden verify, each
// built from what the command also writes (its JSON report, its pictures, the
// verification report), so the page and the files never disagree.
#include <nlohmann/json.hpp>
#include <vector>

#include "fp4emu/golden/suite.hpp"
#include "html_report.hpp"

namespace fp4emu::cli::html {

// `report`: compare's JSON report (--json's content).
Page compare_page(const nlohmann::ordered_json& report);
// `report`: summary.json; `figures`: the heatmaps written beside it.
Page underflow_page(const nlohmann::ordered_json& report, const std::vector<Figure>& figures);
// `report`: resq.json; `figures`: one chart per entry of its "results", in order.
Page resq_page(const nlohmann::ordered_json& report, const std::vector<Figure>& figures);
// Every case with its status; the failing ones first, with their classification.
Page verify_page(const golden::VerifyReport& report, const golden::VerifyOptions& options);

}  // namespace fp4emu::cli::html
