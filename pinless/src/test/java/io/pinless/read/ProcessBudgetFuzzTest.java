package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.List;

/**
 * Property: for any sequence of connections tracking and releasing buffers, reporting credit,
 * asking for their credit cap with any messages under way (continuing or new, their received
 * bytes tracked or not) as time passes, sweeping and ending, the process's sums equal what the
 * connections report; loans are all or nothing and within the overdraft and, while anything is
 * lent, within what may still be committed past what caps promise; an idle connection of an
 * unpressed process gets credit only under the idle threshold; a message is covered only in its
 * connection's turn; a pressed cap leaves a connection within its fair share and its loan, or what
 * its covered messages need, and never under that; and once everything is released and every
 * connection ended, nothing is counted and nobody waits.
 */
class ProcessBudgetFuzzTest {
  private static final int MAX_OPS = 96;

  /** One connection: its budget and the buffers the application holds of it. */
  private static final class Connection {
    final ReadBudget budget;
    final List<ByteBuf> held = new ArrayList<>();
    long credit;
    boolean ended;
    ProcessBudgetTest.Need messages = new ProcessBudgetTest.Need(0);
    /** The DATA bytes its budget saw when it last asked for its cap. */
    long dataSeen;

    Connection(ProcessBudget process) {
      budget = new ReadBudget(Long.MAX_VALUE, process);
    }
  }

  @FuzzTest
  void loansAndCapsStayWithinTheLimit(FuzzedDataProvider data) {
    long limit = data.consumeLong(1 << 12, 1L << 26);
    long[] now = {0};
    ProcessBudget process = new ProcessBudget(limit, () -> now[0]);
    List<Connection> connections = new ArrayList<>();
    int count = data.consumeInt(1, 8);
    for (int i = 0; i < count; i++) {
      connections.add(new Connection(process));
    }
    try {
      for (int op = 0; op < MAX_OPS && data.remainingBytes() > 0; op++) {
        Connection c = connections.get(data.consumeInt(0, count - 1));
        if (data.consumeBoolean()) {
          // Time passes: a loan whose messages receive nothing may go stale.
          now[0] += data.consumeLong(0, 2 * ProcessBudget.STALLED_LOAN_NANOS);
        }
        step(data, process, c, limit, connections);
        check(process, connections, limit);
      }
    } finally {
      for (Connection c : connections) {
        c.held.forEach(ByteBuf::release);
        c.held.clear();
        c.budget.end();
        c.budget.releaseAll();
      }
    }
    assertEquals(0, process.heldBytes(), "released and ended: nothing held");
    assertEquals(0, process.creditBytes(), "nor owed");
    assertEquals(0, process.overdraftBytes(), "nor lent");
    assertEquals(0, process.promisedBytes(), "nor promised");
    assertEquals(0, process.connections());
    assertEquals(0, process.waitingConnections(), "nor waits");
  }

  private static void step(FuzzedDataProvider data, ProcessBudget process, Connection c,
      long limit, List<Connection> connections) {
    switch (data.consumeInt(0, 6)) {
      case 0:
        if (!c.ended) {
          ByteBuf buf = Unpooled.wrappedBuffer(new byte[data.consumeInt(1, 1 << 16)]);
          c.budget.track(buf);
          c.held.add(buf); // the application's reference
        }
        break;
      case 1:
        if (!c.held.isEmpty()) {
          c.held.remove(data.consumeInt(0, c.held.size() - 1)).release();
        }
        break;
      case 2:
        c.budget.sweep();
        break;
      case 3:
        if (!c.ended) {
          c.credit = data.consumeLong(0, limit);
          c.budget.credit(c.credit);
        }
        break;
      case 4:
        if (!c.ended) {
          long need = data.consumeLong(0, 2 * limit);
          long sent = c.messages.data + data.consumeInt(0, 1 << 16);
          if (data.consumeBoolean()) {
            c.messages = new ProcessBudgetTest.Need(need);
          } else {
            c.messages.remaining = need;
          }
          c.messages.data = sent;
          // What the messages under way received, which the budget may not track yet (a cut
          // frame's piece, a join that waits) or may track in part.
          c.messages.pending =
              need == 0 || data.consumeBoolean() ? 0 : data.consumeLong(0, 2 * limit);
          askForCredit(process, c, connections);
        }
        break;
      case 5:
        c.budget.end();
        c.ended = true;
        c.credit = 0;
        break;
      default:
        c.budget.sweep();
        if (c.ended && c.budget.trackedBuffers() == 0) {
          c.budget.releaseAll();
        }
        break;
    }
  }

  /**
   * A connection asks for its cap: pressed, the loan is all or nothing, its messages are covered
   * only in its turn, and the cap is within share and loan; not pressed, no loan and the cap
   * within this connection's part of the room below the threshold.
   */
  private static void askForCredit(ProcessBudget process, Connection c,
      List<Connection> connections) {
    long loanBefore = c.budget.loanBytes();
    long lentBefore = process.overdraftBytes();
    long committedBefore = process.committedBytes();
    long promisedBefore = process.promisedBytes();
    boolean coveredBefore = c.messages.covered;
    boolean idle = c.messages.remainingBytes() == 0 && c.messages.data == c.dataSeen;
    c.dataSeen = c.messages.data;
    long share = process.fairShareBytes();
    long cap = c.budget.maxCreditBytes(c.messages);
    boolean pressed = process.isPressed();
    long room = process.roomBytes() * 4 / 5 / process.connections();
    long loan = c.budget.loanBytes();
    // A cap counts what the messages under way received, tracked or not.
    long tracked = Math.max(c.budget.trackedBytes(), c.messages.pendingFrameBytes());
    // The join on a first report may have shrunk the share.
    share = Math.min(share, process.fairShareBytes());
    assertTrue(cap >= 0, "cap " + cap);
    long withinShare = Math.max(0, process.fairShareBytes() + loan - tracked);
    if (!pressed) {
      assertEquals(0, loan, "not pressed, no loan");
      assertEquals(0, c.budget.promisedBytes(), "not pressed, nothing promised");
      if (idle) {
        long idleRoom = process.idleRoomBytes() * 4 / 5 / process.connections();
        assertEquals(Math.max(c.credit + idleRoom, ReadBudget.IDLE_CREDIT_BYTES), cap,
            "not pressed and idle: its part of the room under the idle threshold, or HTTP/2's "
                + "first window");
        return;
      }
      assertTrue(cap >= c.credit && cap <= c.credit + Math.max(room, ReadBudget.MIN_ROOM_BYTES),
          "not pressed, its credit and at most its part of the room " + room + ": " + cap);
      return;
    }
    long shareLeft = Math.max(0, process.fairShareBytes() + loan - tracked) * 4 / 5;
    assertEquals(Math.max(0, Math.max(cap, shareLeft) - c.credit), c.budget.promisedBytes(),
        "pressed, what its cap, or its share once a message starts, allows past its credit is "
            + "promised");
    long covered = c.messages.coveredBytes();
    long wanted = Math.max(0, tracked + covered * 5 / 4 - share);
    // With no message under way and a share that leaves it nothing, a connection may borrow its
    // next message's start besides.
    boolean start = c.messages.remainingBytes() == 0 && Math.max(0, share - tracked) * 4 / 5 == 0;
    long withStart = Math.max(0, tracked + Loan.START_BYTES * 5 / 4 - share);
    assertTrue(loan == wanted || start && loan == withStart
        || loan == loanBefore && wanted > loanBefore,
        "a loan is all that is wanted or unchanged: " + loanBefore + " -> " + loan + ", wanted "
            + wanted + (start ? " or " + withStart + " with a start" : ""));
    long fresh = loan - Math.max(loanBefore, Math.max(0, tracked - share));
    assertTrue(lentBefore == 0 && !(start && loan == withStart) || fresh <= 0
        || committedBefore + promisedBefore * 5 / 4 + fresh <= process.limitBytes(),
        "with something lent, or for a start, a loan for bytes to come keeps what is committed "
            + "and promised within the limit: " + committedBefore + " + " + promisedBefore + " + "
            + fresh);
    if (!coveredBefore && c.messages.covered) {
      for (Connection o : connections) {
        assertTrue(o == c || !o.budget.queued() || o.budget.turn() >= c.budget.turn() - 1,
            "covered in its turn: another waits at " + o.budget.turn() + ", this one's was "
                + (c.budget.turn() - 1));
      }
    }
    assertTrue(cap <= Math.max(withinShare, covered), "cap " + cap + " past share "
        + process.fairShareBytes() + " and loan " + loan + " less held " + tracked
        + ", and past what covered messages need, " + covered);
    assertTrue(cap >= covered, "a connection gets all its covered messages need: cap " + cap
        + ", covered " + covered);
  }

  /** The process's sums are what the connections report. */
  private static void check(ProcessBudget process, List<Connection> connections, long limit) {
    long held = 0;
    long credit = 0;
    long loans = 0;
    long promised = 0;
    for (Connection c : connections) {
      held += c.budget.trackedBytes();
      loans += c.budget.loanBytes();
      promised += c.budget.promisedBytes();
      if (!c.ended) {
        credit += c.credit;
      }
    }
    assertEquals(promised, process.promisedBytes(), "promised credit is the connections' sum");
    assertEquals(0, process.unpromisedLoanBytes(), "every loan lent is promised once its cap is");
    assertEquals(held, process.heldBytes(), "held bytes are the connections' sum");
    assertEquals(credit, process.creditBytes(), "credit is the live connections' sum");
    assertEquals(loans, process.overdraftBytes(), "the overdraft is the loans' sum");
    assertTrue(loans <= (long) (limit * ProcessBudget.OVERDRAFT), "loans within the overdraft");
    assertEquals(connections.stream().filter(c -> c.budget.queued()).count(),
        process.waitingConnections(), "the queue holds the connections waiting");
  }
}
