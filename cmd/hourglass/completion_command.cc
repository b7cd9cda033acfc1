// The completion subcommand: the shell completion of the command line, made
// from the command line itself, so that it never goes stale.

#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cmd/hourglass/command.h"

namespace hourglass::cli {
namespace {

// What the completion knows of one command: the words that may follow it.
struct CommandWords {
  // The subcommands that lead to it, e.g. "groups create"; empty for the
  // program itself.
  std::string path;
  // Its subcommands listed in --help (hidden ones, such as old names, are
  // not offered).
  std::vector<std::string> subcommands;
  // All its subcommands, hidden ones too: the words that lead deeper.
  std::vector<std::string> names;
  // Its long options.
  std::vector<std::string> options;
  // For a subcommand, the program's long options that are not its own: the
  // global ones, which may follow it (fallthrough passes them up).
  std::vector<std::string> globals;
  // Those of `options` and `globals` that take a value, and those whose
  // value is a file.
  std::vector<std::string> valued;
  std::vector<std::string> files;
};

bool Hidden(const CLI::App& command) { return command.get_group().empty(); }

void Collect(const CLI::App& command, const std::string& path,
             std::vector<CommandWords>& out) {
  CommandWords words;
  words.path = path;
  const std::vector<const CLI::App*> subcommands =
      command.get_subcommands([](const CLI::App* subcommand) {
        return !subcommand->get_name().empty();
      });
  for (const CLI::App* subcommand : subcommands) {
    words.names.push_back(subcommand->get_name());
    if (!Hidden(*subcommand)) {
      words.subcommands.push_back(subcommand->get_name());
    }
  }
  std::set<std::string> seen;
  for (const CLI::App* at = &command; at != nullptr;
       at = at->get_fallthrough() ? at->get_parent() : nullptr) {
    // A parent's own options are for its own action (dlq's --limit), not
    // its subcommands'.
    if (at != &command && at->get_parent() != nullptr) continue;
    for (const CLI::Option* option : at->get_options()) {
      if (option->get_group().empty()) continue;  // Hidden.
      for (const std::string& long_name : option->get_lnames()) {
        const std::string name = "--" + long_name;
        if (!seen.insert(name).second) continue;
        (at == &command ? words.options : words.globals).push_back(name);
        if (option->get_expected_max() == 0) continue;  // A flag.
        words.valued.push_back(name);
        if (option->get_type_name() == "FILE") words.files.push_back(name);
      }
    }
  }
  out.push_back(std::move(words));
  for (const CLI::App* subcommand : subcommands) {
    Collect(*subcommand,
            path.empty() ? subcommand->get_name()
                         : absl::StrCat(path, " ", subcommand->get_name()),
            out);
  }
}

// `name` as a part of a shell function's name.
std::string FunctionName(std::string name) {
  for (char& c : name) {
    if (!absl::ascii_isalnum(c)) c = '_';
  }
  return name;
}

// The script around the table of commands (@TABLE@), for the program
// @PROGRAM@ with the function @FUNCTION@.
constexpr char kScript[] =
    R"(# bash completion of @PROGRAM@: its subcommands, their long options, and
# file names where an option takes a FILE. Made by `@PROGRAM@ completion bash`
# from the command line itself; load it with
#   source <(@PROGRAM@ completion bash)
# or install it as share/bash-completion/completions/@PROGRAM@.

# Sets what may follow the command at path $1 (its subcommands from the
# program on, e.g. "groups create"): the subcommands offered, the names that
# lead deeper (old names too), its options, the global options that may
# follow it, those of both that take a value, and those whose value is a
# file.
@FUNCTION@_command() {
  case $1 in
@TABLE@  esac
}

# Completes the word at COMP_CWORD of COMP_WORDS: a subcommand, a long
# option (also where no subcommand can follow), or the file an option takes.
# The command's own options come first: the global ones only where none of
# its own fits. Option values are skipped on the way: "--opt value" and
# "--opt=value", which COMP_WORDBREAKS may split into "--opt" "=" "value".
@FUNCTION@() {
  local cur=${COMP_WORDS[COMP_CWORD]} word path="" option="" prefix="" i=1
  local commands="" names="" options="" globals="" valued="" files=""
  @FUNCTION@_command ""
  while ((i < COMP_CWORD)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -* ]]; then
      if [[ $word != *=* && " $valued " == *" $word "* ]]; then
        [[ ${COMP_WORDS[i + 1]} == "=" ]] && ((i += 1))
        ((i += 1))
      fi
    elif [[ " $names " == *" $word "* ]]; then
      path=${path:+$path }$word
      @FUNCTION@_command "$path"
    fi
    ((i += 1))
  done

  if [[ $cur == "=" ]]; then
    option=${COMP_WORDS[COMP_CWORD - 1]}
    cur=""
  elif ((COMP_CWORD > 1)) && [[ ${COMP_WORDS[COMP_CWORD - 1]} == "=" ]]; then
    option=${COMP_WORDS[COMP_CWORD - 2]}
  elif [[ $cur == --*=* ]]; then
    option=${cur%%=*}
    prefix=$option=
    cur=${cur#*=}
  elif [[ $cur != -* && " $valued " == *" ${COMP_WORDS[COMP_CWORD - 1]} "* ]]; then
    option=${COMP_WORDS[COMP_CWORD - 1]}
  fi
  COMPREPLY=()
  if [[ -n $option ]]; then
    if [[ " $files " == *" $option "* ]]; then
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -P "$prefix" -f -- "$cur")
    fi
  elif [[ $cur == -* || -z $commands ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
    if ((${#COMPREPLY[@]} == 0)); then
      mapfile -t COMPREPLY < <(compgen -W "$globals" -- "$cur")
    fi
  else
    mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
  fi
}

complete -F @FUNCTION@ @PROGRAM@
)";

void ReplaceAll(std::string& text, const std::string& from,
                const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  std::vector<CommandWords> commands;
  Collect(app, "", commands);
  std::string table;
  for (const CommandWords& words : commands) {
    absl::StrAppend(&table, "    \"", words.path, "\")\n");
    for (const auto& [name, list] :
         {std::pair<const char*, const std::vector<std::string>&>{
              "commands", words.subcommands},
          {"names", words.names},
          {"options", words.options},
          {"globals", words.globals},
          {"valued", words.valued},
          {"files", words.files}}) {
      absl::StrAppend(&table, "      ", name, "=\"", absl::StrJoin(list, " "),
                      "\"\n");
    }
    absl::StrAppend(&table, "      ;;\n");
  }
  std::string script = kScript;
  ReplaceAll(script, "@TABLE@", table);
  ReplaceAll(script, "@FUNCTION@", "_" + FunctionName(app.get_name()));
  ReplaceAll(script, "@PROGRAM@", app.get_name());
  return script;
}

void AddCompletionCommand(Registry& registry) {
  CLI::App* completion = registry.app().add_subcommand(
      "completion", "Print a shell completion script");
  completion->require_subcommand(1);
  completion->footer(R"(
The script completes subcommands, their long options and file names. It is
made from this hourglass's own command line, so it matches it. Installed
with the CLI as share/bash-completion/completions/hourglass.

Examples:
  hourglass completion bash > ~/.local/share/bash-completion/completions/hourglass
  source <(hourglass completion bash))");
  CLI::App* bash = completion->add_subcommand(
      "bash", "Print the bash completion script (bash 4 and later)");
  registry.SetAction(bash, [&app = registry.app()] {
    std::cout << BashCompletion(app) << std::flush;
    return absl::OkStatus();
  });
}

}  // namespace hourglass::cli
