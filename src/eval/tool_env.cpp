#include "eval/tool_env.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace mx::eval {

using json = nlohmann::json;

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

json OrderJson(const Order& o) {
  return {{"order_id", o.id},
          {"account_id", o.account_id},
          {"item", o.item},
          {"total", fmt::format("{}.{:02d}", o.total_cents / 100, o.total_cents % 100)},
          {"status", o.status},
          {"refunded", o.refunded}};
}

std::string Error(const std::string& message) { return json{{"error", message}}.dump(); }

json Function(const std::string& name, const std::string& description,
              const std::vector<std::pair<std::string, std::string>>& params) {
  json props = json::object();
  json required = json::array();
  for (const auto& [p, d] : params) {
    props[p] = {{"type", "string"}, {"description", d}};
    required.push_back(p);
  }
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", description},
            {"parameters", {{"type", "object"}, {"properties", props}, {"required", required}}}}}};
}

}  // namespace

json Store::ToJson() const {
  json a = json::object(), o = json::object();
  for (const auto& [id, x] : accounts) a[id] = {{"name", x.name}, {"email", x.email}};
  for (const auto& [id, x] : orders) o[id] = OrderJson(x);
  return {{"accounts", a}, {"orders", o}};
}

Store InitialStore() {
  Store s;
  for (const Account& a : {Account{"A-100", "Alice Martin", "alice@example.com"},
                           Account{"A-200", "Bob Chen", "bob@example.com"},
                           Account{"A-300", "Carol Diaz", "carol@example.com"}}) {
    s.accounts[a.id] = a;
  }
  for (const Order& o : {Order{"O-1001", "A-100", "desk lamp", 3900, "delivered", false},
                         Order{"O-1002", "A-100", "keyboard", 8900, "shipped", false},
                         Order{"O-1003", "A-100", "usb cable", 1200, "pending", false},
                         Order{"O-2001", "A-200", "monitor", 21900, "pending", false},
                         Order{"O-2002", "A-200", "headphones", 12900, "pending", false},
                         Order{"O-2003", "A-200", "mouse", 2900, "delivered", false},
                         Order{"O-3001", "A-300", "office chair", 15900, "delivered", false}}) {
    s.orders[o.id] = o;
  }
  return s;
}

json ToolSchemas() {
  return json::array(
      {Function("find_account_by_email", "Look up a customer's account by their email address.",
                {{"email", "the customer's email address"}}),
       Function("get_order", "Get one order: its account, item, total, status and refund state.",
                {{"order_id", "an order id such as O-1001"}}),
       Function("list_orders", "List every order of an account.",
                {{"account_id", "an account id such as A-100"}}),
       Function("cancel_order", "Cancel an order. Only pending orders can be cancelled.",
                {{"order_id", "the order to cancel"}}),
       Function("refund_order", "Refund an order. Only delivered orders can be refunded, once.",
                {{"order_id", "the order to refund"}}),
       Function("update_email", "Change the email address of an account.",
                {{"account_id", "the account"}, {"new_email", "the new email address"}})});
}

std::string Policy() {
  return "You are the customer support agent of an online shop. Use the tools to look things "
         "up and to make changes; never guess. Rules: (1) first verify the customer by looking "
         "up their account with the email they give (find_account_by_email); without a "
         "matching account, do nothing for them. (2) Act only on orders that belong to the "
         "verified account. (3) Only pending orders can be cancelled; only delivered orders "
         "can be refunded, and only once. (4) If a request breaks a rule, do not call the "
         "tool that would change anything: tell the customer you cannot do it and why. Answer "
         "briefly, naming order ids, statuses and amounts.";
}

std::string RunTool(Store& store, const std::string& name, const std::string& arguments) {
  json args = json::parse(arguments.empty() ? std::string("{}") : arguments, nullptr, false);
  if (args.is_discarded() || !args.is_object()) {
    return Error("arguments are not a JSON object: " + arguments.substr(0, 200));
  }
  auto arg = [&](const char* key, std::string* out) {
    auto it = args.find(key);
    if (it == args.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  auto missing = [&](const char* key) {
    return Error(fmt::format("{}: missing string argument '{}'", name, key));
  };
  std::string id;
  if (name == "find_account_by_email") {
    std::string email;
    if (!arg("email", &email)) return missing("email");
    for (const auto& [aid, a] : store.accounts) {
      if (Lower(a.email) == Lower(email)) {
        return json{{"account_id", a.id}, {"name", a.name}, {"email", a.email}}.dump();
      }
    }
    return Error("no account with email " + email);
  }
  if (name == "list_orders") {
    if (!arg("account_id", &id)) return missing("account_id");
    if (!store.accounts.count(id)) return Error("no account " + id);
    json list = json::array();
    for (const auto& [oid, o] : store.orders) {
      if (o.account_id == id) list.push_back(OrderJson(o));
    }
    return json{{"orders", list}}.dump();
  }
  if (name == "update_email") {
    std::string email;
    if (!arg("account_id", &id)) return missing("account_id");
    if (!arg("new_email", &email)) return missing("new_email");
    auto it = store.accounts.find(id);
    if (it == store.accounts.end()) return Error("no account " + id);
    if (email.find('@') == std::string::npos) return Error("not an email address: " + email);
    it->second.email = email;
    return json{{"account_id", id}, {"email", email}, {"updated", true}}.dump();
  }
  if (name == "get_order" || name == "cancel_order" || name == "refund_order") {
    if (!arg("order_id", &id)) return missing("order_id");
    auto it = store.orders.find(id);
    if (it == store.orders.end()) return Error("no order " + id);
    Order& o = it->second;
    if (name == "cancel_order") {
      if (o.status != "pending") {
        return Error(
            fmt::format("order {} is {}: only pending orders can be cancelled", id, o.status));
      }
      o.status = "cancelled";
    } else if (name == "refund_order") {
      if (o.status != "delivered") {
        return Error(
            fmt::format("order {} is {}: only delivered orders can be refunded", id, o.status));
      }
      if (o.refunded) return Error(fmt::format("order {} was already refunded", id));
      o.refunded = true;
    }
    return OrderJson(o).dump();
  }
  return Error("unknown tool " + name);
}

std::vector<ToolTask> ToolTasks() {
  std::vector<ToolTask> t;
  auto add = [&](std::string id, std::string description, std::vector<std::string> turns,
                 auto change, std::vector<std::string> required, bool refusal) {
    ToolTask x;
    x.id = std::move(id);
    x.description = std::move(description);
    x.user_turns = std::move(turns);
    x.expected = InitialStore();
    change(x.expected);
    x.required = std::move(required);
    x.refusal = refusal;
    t.push_back(std::move(x));
  };
  auto none = [](Store&) {};
  add("order_status", "a lookup: verify, read an order's status",
      {"Hi, my email is alice@example.com. What is the status of my order O-1002?"}, none,
      {"shipped"}, false);
  add(
      "cancel_pending", "one change: cancel a pending order",
      {"I'm bob@example.com. Please cancel my order O-2001."},
      [](Store& s) { s.orders["O-2001"].status = "cancelled"; }, {"O-2001"}, false);
  add("cancel_shipped", "a refusal: a shipped order cannot be cancelled",
      {"This is alice@example.com. Cancel order O-1002 please, I changed my mind."}, none, {},
      true);
  add(
      "update_email", "several calls: find the account, then change its email",
      {"My email is carol@example.com; please change it to carol.diaz@example.org."},
      [](Store& s) { s.accounts["A-300"].email = "carol.diaz@example.org"; }, {}, false);
  add(
      "cancel_all_pending", "several calls: list the orders, cancel each pending one",
      {"bob@example.com here. Cancel all of my pending orders."},
      [](Store& s) {
        s.orders["O-2001"].status = "cancelled";
        s.orders["O-2002"].status = "cancelled";
      },
      {"O-2001", "O-2002"}, false);
  add("other_account", "a refusal: the order belongs to another customer",
      {"I'm carol@example.com. Cancel order O-2002 for me."}, none, {}, true);
  add(
      "refund_delivered", "one change: refund a delivered order",
      {"alice@example.com: please refund my desk lamp, order O-1001."},
      [](Store& s) { s.orders["O-1001"].refunded = true; }, {"O-1001"}, false);
  add(
      "two_turns", "two user turns: find the delivered order, then refund it",
      {"Hi, I'm bob@example.com. Which of my orders have been delivered?",
       "Thanks. Please refund that one."},
      [](Store& s) { s.orders["O-2003"].refunded = true; }, {"O-2003"}, false);
  add("total_spent", "a computation over a listing: the sum of an account's orders",
      {"I'm alice@example.com. How much is the total of all my orders together?"}, none, {"140"},
      false);
  add("unknown_customer", "a refusal: no account has this email",
      {"Cancel order O-3001, my email is dave@example.com."}, none, {}, true);
  return t;
}

bool IsRefusal(const std::string& text) {
  const std::string l = Lower(text);
  for (const char* p : {"cannot", "can't", "can not", "unable", "not able", "not allowed",
                        "not possible", "won't be able", "i'm sorry", "i am sorry"}) {
    if (l.find(p) != std::string::npos) return true;
  }
  return false;
}

Judgement Judge(const ToolTask& task, const Store& final_store,
                const std::vector<std::string>& answers) {
  Judgement j;
  if (!(final_store == task.expected)) j.reasons.push_back("state");
  std::string all;
  for (const std::string& a : answers) all += Lower(a) + "\n";
  for (const std::string& r : task.required) {
    if (all.find(Lower(r)) == std::string::npos) j.reasons.push_back("missing '" + r + "'");
  }
  if (task.refusal && (answers.empty() || !IsRefusal(answers.back()))) {
    j.reasons.push_back("no refusal");
  }
  j.success = j.reasons.empty();
  return j;
}

}  // namespace mx::eval
