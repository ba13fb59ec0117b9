// cli_main.h: the one way zeropp's rank programs end on an error: a single line on stderr and
// exit code 1, never an uncaught exception or a stack trace on the terminal.
//
//   int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, zeropp::Main); }
//
// The line is "error: [rank R] <message>", the rank named once: under zpp's launcher, which
// already puts "[rank R]" before every line of a rank, the message's own prefix is dropped. An
// ATen/c10 error prints its message without the C++ backtrace; the whole report, backtrace
// included, goes to $ZEROPP_LOG_DIR (or /tmp)/zeropp-error.rank<R>.log, named in the line. A
// communication error also dumps the flight recorder (flight_recorder.h), as does SIGTERM.
#pragma once

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "zeropp/comm_work.h"
#include "zeropp/flight_recorder.h"

namespace zeropp {
namespace cli {

inline int RunMain(int argc, char** argv, int (*body)(int, char**)) {
  const char* rank_env = std::getenv("RANK");
  const std::string rank = rank_env ? rank_env : "?";
  auto report = [&](std::string msg, const std::string& log_text) {
    const std::string tag = "[rank " + rank + "] ";
    if (msg.rfind(tag, 0) == 0) msg = msg.substr(tag.size());
    if (!log_text.empty()) {
      const char* dir = std::getenv("ZEROPP_LOG_DIR");
      const std::string path = std::string(dir ? dir : "/tmp") + "/zeropp-error.rank" + rank + ".log";
      std::ofstream(path) << log_text << "\n";
      msg += " (backtrace in " + path + ")";
    }
    // zpp run prefixes lines itself; a program run alone (export, diagnose) has no rank to name.
    const bool launched = std::getenv("ZEROPP_LAUNCHER") != nullptr;
    std::fprintf(stderr, "error: %s%s\n", launched || !rank_env ? "" : tag.c_str(), msg.c_str());
    return 1;
  };
  c10::initLogging();  // LibTorch's log level from TORCH_CPP_LOG_LEVEL (zpp run sets FATAL)
  FlightRecorder::DumpOnTermination();
  // A file-size limit or a full disk then fails the write with an error, not the process.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return body(argc, argv);
  } catch (const CommError& e) {
    // What every group was doing, for ./zpp diagnose (the other ranks dump when stopped).
    std::string dump = FlightRecorder::Dump(e.what());
    if (dump.empty()) dump = FlightRecorder::LastDump();
    return report(std::string(e.what()) + (dump.empty() ? "" : " (flight record in " + dump + ")"), "");
  } catch (const c10::Error& e) {
    std::string first = e.what_without_backtrace();
    const auto nl = first.find('\n');
    if (nl != std::string::npos) first = first.substr(0, nl);
    return report(first, e.what());
  } catch (const std::exception& e) {
    // A runtime error wrapping an ATen error (std::throw_with_nested): its line, the ATen report
    // with backtrace to the log.
    std::string log_text;
    try {
      std::rethrow_if_nested(e);
    } catch (const c10::Error& inner) {
      log_text = inner.what();
    } catch (...) {
    }
    return report(e.what(), log_text);
  }
}

}  // namespace cli
}  // namespace zeropp
